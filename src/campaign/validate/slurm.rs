//! `[arms.slurm]`: a Slurm job's recipe (argv, env, cwd, the job's resources, its name).

use super::recipes::{argv_checks, env_checks};
use crate::campaign::diag::{FieldPath, Reporter};
use crate::campaign::paths::resolve;
use crate::campaign::spec::SlurmRecipe;
use std::path::Path;

/// sbatch options bakeoff sets itself from the recipe (refused in `sbatch_args`).
const OWN_OPTIONS: &[(&str, &str)] = &[
    ("--job-name", "job_name"),
    ("-J", "job_name"),
    (
        "--output",
        "(bakeoff writes the job's output to the arm's log)",
    ),
    ("-o", "(bakeoff writes the job's output to the arm's log)"),
    (
        "--error",
        "(bakeoff writes the job's output to the arm's log)",
    ),
    ("-e", "(bakeoff writes the job's output to the arm's log)"),
    ("--open-mode", "(bakeoff appends to the arm's log)"),
    ("--chdir", "cwd"),
    ("-D", "cwd"),
    ("--export", "env"),
    ("--wrap", "argv"),
    ("--parsable", "(bakeoff reads the job id)"),
    ("--partition", "partition"),
    ("-p", "partition"),
    ("--nodelist", "nodelist"),
    ("-w", "nodelist"),
    ("--constraint", "constraint"),
    ("-C", "constraint"),
    ("--gres", "gpus / gpu_type"),
    ("--gpus", "gpus / gpu_type"),
    ("-G", "gpus / gpu_type"),
    ("--cpus-per-task", "cpus"),
    ("-c", "cpus"),
    ("--mem", "memory"),
    ("--time", "time_limit"),
    ("-t", "time_limit"),
    ("--account", "account"),
    ("-A", "account"),
    (
        "--hold",
        "(a held job never starts: bakeoff would wait for nothing)",
    ),
    (
        "-H",
        "(a held job never starts: bakeoff would wait for nothing)",
    ),
    ("--array", "(one arm is one job)"),
    ("-a", "(one arm is one job)"),
];

/// `[D-]HH:MM:SS`, `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM` (Slurm's `--time` forms).
pub(super) fn time_limit_ok(t: &str) -> bool {
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(d), r),
        None => (None, t),
    };
    let num = |s: &str| !s.is_empty() && s.len() <= 6 && s.chars().all(|c| c.is_ascii_digit());
    if days.is_some_and(|d| !num(d)) {
        return false;
    }
    let parts: Vec<&str> = rest.split(':').collect();
    (1..=3).contains(&parts.len()) && parts.iter().all(|p| num(p))
}

/// A value that goes into `--opt=VALUE` as one argument: no whitespace, not empty.
pub(super) fn word_ok(v: &str) -> bool {
    !v.is_empty() && !v.chars().any(|c| c.is_whitespace() || c.is_control())
}

pub(super) fn slurm(
    s: &mut SlurmRecipe,
    rp: &FieldPath,
    dir: &Path,
    ids: (&str, &str),
    r: &mut Reporter,
) {
    argv_checks(r, &rp.key("argv"), &s.argv, true);
    env_checks(r, &rp.key("env"), &s.env);
    s.cwd = if s.cwd.as_os_str().is_empty() {
        dir.to_path_buf()
    } else {
        resolve(dir, &s.cwd)
    };
    if let Some(a0) = s.argv.first_mut() {
        let prog = Path::new(a0.as_str());
        if prog.is_relative() && a0.contains('/') {
            *a0 = resolve(&s.cwd, prog).display().to_string();
        }
    }
    for (field, v) in [
        ("partition", &s.partition),
        ("nodelist", &s.nodelist),
        ("constraint", &s.constraint),
        ("gpu_type", &s.gpu_type),
        ("memory", &s.memory),
        ("account", &s.account),
    ] {
        if let Some(v) = v {
            if !word_ok(v) {
                r.error(
                    &rp.key(field),
                    format!("`{v}` is not a usable {field} (empty, or contains spaces)"),
                    format!("give the {field} as sbatch takes it, or leave it out"),
                );
            }
        }
    }
    if s.gpu_type.is_some() && s.gpus == 0 {
        r.error(
            &rp.key("gpu_type"),
            "gpu_type without gpus",
            "set gpus = N (GPUs per node, --gres=gpu:TYPE:N), or leave gpu_type out",
        );
    }
    if s.cpus == Some(0) {
        r.error(
            &rp.key("cpus"),
            "cpus = 0",
            "give the CPUs per task (--cpus-per-task), or leave it out",
        );
    }
    if let Some(t) = &s.time_limit {
        if !time_limit_ok(t) {
            r.error(
                &rp.key("time_limit"),
                format!("`{t}` is not a Slurm time limit"),
                "use minutes (\"90\"), \"HH:MM:SS\" or \"D-HH:MM:SS\"",
            );
        }
    }
    if s.pending_timeout_s == Some(0) {
        r.error(
            &rp.key("pending_timeout_s"),
            "pending_timeout_s = 0",
            "give the longest wait in seconds for the job to start, or leave it out for the lane's ready timeout",
        );
    }
    for (j, a) in s.sbatch_args.iter().enumerate() {
        let opt = a.split('=').next().unwrap_or("");
        let short = opt.len() > 2 && opt.starts_with('-') && !opt.starts_with("--");
        let key = if short { &opt[..2] } else { opt };
        if let Some((_, field)) = OWN_OPTIONS.iter().find(|(o, _)| *o == key) {
            r.error(
                &rp.key("sbatch_args").index(j),
                format!("`{opt}` is set by bakeoff from the recipe"),
                if field.starts_with('(') {
                    format!("leave it out {field}")
                } else {
                    format!("use the recipe's `{field}` field instead")
                },
            );
        } else if !a.starts_with('-') {
            r.error(
                &rp.key("sbatch_args").index(j),
                format!("`{a}` is not an sbatch option"),
                "give options in the --name=value form, one per element (the command goes in argv)",
            );
        }
    }
    let (campaign_id, arm_id) = ids;
    if s.job_name.is_empty() {
        s.job_name = format!("bakeoff-{campaign_id}-{arm_id}");
    } else if s.job_name.len() > 100
        || !s
            .job_name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '.' | '-'))
    {
        r.error(
            &rp.key("job_name"),
            format!("`{}` is not a usable job name", s.job_name),
            "use letters, digits, `-`, `_` and `.` (bakeoff finds a Slurm incumbent by this name)",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::time_limit_ok;

    #[test]
    fn time_limits() {
        for ok in ["90", "1:30:00", "2-00:00:00", "10:00", "1-12"] {
            assert!(time_limit_ok(ok), "{ok}");
        }
        for bad in ["", "1h", "1:2:3:4", "-1", "a-10", "1 0"] {
            assert!(!time_limit_ok(bad), "{bad}");
        }
    }
}
