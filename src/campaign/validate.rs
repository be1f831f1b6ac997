//! Semantic checks of a parsed campaign, and the defaults that depend on other fields.
//!
//! Every problem becomes one diagnostic at the line of the field it is about; all are collected.

use super::diag::{CampaignError, FieldPath, Reporter, SpanIndex};
use super::spec::{resolve, Arm, Campaign, EnvValue, GateName, PreflightGate, Role};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Arm ids that would collide with campaign-level evidence files (`restoration-preflight.json`).
const RESERVED_IDS: &[&str] = &["restoration"];

fn p(dotted: &str) -> FieldPath {
    FieldPath::parse(dotted)
}

/// Lowercase letters, digits and single `-` between them.
pub fn is_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.split('-').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

/// A POSIX environment variable name.
pub fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether a variable or flag name looks like it holds a secret: one of its words (split at
/// anything but letters and digits) is KEY, APIKEY, TOKEN, SECRET, PASSWORD, PASSWD or
/// CREDENTIAL(S), or ends with TOKEN, SECRET, PASSWORD or APIKEY (`HFTOKEN`); unless a word is
/// FILE, PATH, DIR or ENV (the value then names where the secret is, not the secret). Whole words,
/// so `MAX_TOKENS`, `--max-tokens` and `TOKENIZERS_PARALLELISM` are not secrets.
pub fn looks_secret(name: &str) -> bool {
    let words: Vec<String> = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_uppercase())
        .collect();
    if words
        .iter()
        .any(|w| matches!(w.as_str(), "FILE" | "PATH" | "DIR" | "ENV"))
    {
        return false;
    }
    words.iter().any(|w| {
        matches!(
            w.as_str(),
            "KEY"
                | "APIKEY"
                | "TOKEN"
                | "SECRET"
                | "PASSWORD"
                | "PASSWD"
                | "CREDENTIAL"
                | "CREDENTIALS"
        ) || ["TOKEN", "SECRET", "PASSWORD", "APIKEY"]
            .iter()
            .any(|s| w.ends_with(s))
    })
}

/// A literal that cannot be a secret (a number or a boolean), so a secret-looking name may hold it.
fn harmless_literal(v: &str) -> bool {
    v.is_empty() || v.parse::<f64>().is_ok() || matches!(v, "true" | "false")
}

pub(super) fn resolve_and_validate(
    c: &mut Campaign,
    file: &Path,
    index: &SpanIndex,
) -> Result<(), CampaignError> {
    let mut r = Reporter::new(file, index);
    let dir = c.source.dir.clone();
    identity(c, &dir, &mut r);
    lane(c, &mut r);
    workload(c, &mut r);
    gates(c, &dir, &mut r);
    for i in 0..c.arms.len() {
        arm(c, i, &dir, &mut r);
    }
    across_arms(c, &mut r);
    long_context(c, &mut r);
    policy(c, &mut r);
    r.finish()
}

fn identity(c: &mut Campaign, dir: &Path, r: &mut Reporter) {
    let id = c.campaign.id.clone();
    if !is_id(&id) {
        r.error(
            &p("campaign.id"),
            format!("`{id}` is not a valid campaign id (it names the bundle and containers)"),
            "use lowercase letters, digits and `-`, e.g. \"2026-11-30-quant-bakeoff\"",
        );
    }
    if c.campaign.hardware.trim().is_empty() {
        r.error(
            &p("campaign.hardware"),
            "empty hardware description",
            "describe the hardware (\"1x RTX 5090, 32 GiB\") or write \"auto\" to detect it",
        );
    }
    if c.campaign.topology.trim().is_empty() {
        r.error(
            &p("campaign.topology"),
            "empty topology label",
            "say how arms are isolated, e.g. \"isolated direct managed recipe lane\"",
        );
    }
    c.campaign.output = if c.campaign.output.as_os_str().is_empty() {
        resolve(dir, &Path::new("runs").join(&id))
    } else {
        resolve(dir, &c.campaign.output)
    };
}

fn lane(c: &mut Campaign, r: &mut Reporter) {
    let l = &c.lane;
    if l.host.is_empty()
        || l.host.contains("://")
        || l.host.contains('/')
        || l.host.contains(char::is_whitespace)
    {
        r.error(
            &p("lane.host"),
            format!("`{}` is not a host name or address", l.host),
            "give the host only, e.g. \"127.0.0.1\" (no scheme, port or path)",
        );
    }
    if l.port == 0 {
        r.error(
            &p("lane.port"),
            "port 0 is not a port",
            "give a port number from 1 to 65535",
        );
    }
    let mut seen = HashSet::new();
    for (i, g) in l.gpus.iter().enumerate() {
        if !(g.starts_with("GPU-") || g.starts_with("MIG-")) || g.contains(char::is_whitespace) {
            r.error(
                &p("lane.gpus").index(i),
                format!("`{g}` is not a GPU UUID"),
                "list the UUIDs `nvidia-smi -L` prints (\"GPU-…\" or \"MIG-…\"), not indexes",
            );
        }
        if !seen.insert(g) {
            r.error(
                &p("lane.gpus").index(i),
                format!("`{g}` is listed twice"),
                "list each GPU once",
            );
        }
    }
    if !l.health_path.starts_with('/') {
        r.error(
            &p("lane.health_path"),
            format!("`{}` is not a path", l.health_path),
            "give a path starting with `/`, e.g. \"/health\"",
        );
    }
    if l.ready_timeout_s == 0 {
        r.error(
            &p("lane.ready_timeout_s"),
            "must be positive",
            "give the seconds an arm may take to become ready, e.g. 600",
        );
    }
}

/// Reports each item of the list at `path` that repeats an earlier one.
fn no_repeats<T: Eq + std::hash::Hash>(
    r: &mut Reporter,
    path: &str,
    items: &[T],
    name: impl Fn(&T) -> &str,
    fix: &str,
) {
    let mut seen = HashSet::new();
    for (i, x) in items.iter().enumerate() {
        if !seen.insert(x) {
            r.error(
                &p(path).index(i),
                format!("`{}` is listed twice", name(x)),
                fix,
            );
        }
    }
}

fn positive(r: &mut Reporter, path: &str, v: u64, what: &str) {
    if v == 0 {
        r.error(
            &p(path),
            format!("{what} must be positive, not 0"),
            "give a number of 1 or more",
        );
    }
}

fn workload(c: &mut Campaign, r: &mut Reporter) {
    let w = &mut c.workload;
    if w.ranking_priority.is_empty() {
        r.error(
            &p("workload.ranking_priority"),
            "empty ranking priority",
            "list what matters most first, e.g. [\"ttft\", \"decode_tokens_per_second\"]",
        );
    }
    no_repeats(
        r,
        "workload.ranking_priority",
        &w.ranking_priority,
        |m| m.as_str(),
        "list each metric once",
    );
    positive(
        r,
        "workload.matched_prompt_tokens",
        w.matched_prompt_tokens.into(),
        "the matched prompt",
    );
    positive(r, "workload.max_tokens", w.max_tokens.into(), "max_tokens");
    positive(
        r,
        "workload.warm_repetitions",
        w.warm_repetitions.into(),
        "warm repetitions",
    );
    if w.concurrency.is_empty() {
        r.error(
            &p("workload.concurrency"),
            "no concurrency levels",
            "list at least [1]",
        );
    }
    let mut seen = HashSet::new();
    for (i, n) in w.concurrency.iter().enumerate() {
        if *n == 0 {
            r.error(
                &p("workload.concurrency").index(i),
                "concurrency 0",
                "give levels of 1 or more",
            );
        } else if !seen.insert(*n) {
            r.error(
                &p("workload.concurrency").index(i),
                format!("level {n} is listed twice"),
                "list each level once",
            );
        }
    }
    for (name, tokens) in &w.long_context_targets {
        if *tokens == 0 {
            r.error(
                &p("workload.long_context_targets").key(name),
                "a long-context target of 0 tokens",
                "give the prompt tokens retrieval is tested at, e.g. 24000",
            );
        }
    }
    if w.prompt_label.is_empty() {
        w.prompt_label = token_label(w.matched_prompt_tokens.into());
    } else if !w
        .prompt_label
        .chars()
        .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '.')
    {
        r.error(
            &p("workload.prompt_label"),
            format!("`{}` cannot go into a file name", w.prompt_label),
            "use lowercase letters, digits and `.`, e.g. \"4k\"",
        );
    }
    let s = &w.sampling;
    if !(s.temperature.is_finite() && (0.0..=2.0).contains(&s.temperature)) {
        r.error(
            &p("workload.sampling.temperature"),
            format!("temperature {} is out of range", s.temperature),
            "give a temperature from 0 to 2",
        );
    }
    if let Some(tp) = s.top_p {
        if !(tp.is_finite() && tp > 0.0 && tp <= 1.0) {
            r.error(
                &p("workload.sampling.top_p"),
                format!("top_p {tp} is out of range"),
                "give a top_p above 0 and at most 1, or leave it out",
            );
        }
    }
}

/// The shape label of a token count: the count itself below 1000, else whole thousands (`4k` for
/// 3613 or 4096, `128k` for 131072).
pub fn token_label(tokens: u64) -> String {
    if tokens < 1000 {
        tokens.to_string()
    } else if tokens % 1024 == 0 {
        format!("{}k", tokens / 1024)
    } else {
        format!("{}k", (tokens + 500) / 1000)
    }
}

fn suite(r: &mut Reporter, path: &FieldPath, dir: &Path, suite: &mut Option<PathBuf>) {
    if let Some(s) = suite {
        *s = resolve(dir, s);
        if !s.is_file() {
            r.error(
                path,
                format!("suite file {} does not exist", s.display()),
                "give a path relative to the campaign file's directory, or leave `suite` out for the built-in suite",
            );
        }
    }
}

fn gates(c: &mut Campaign, dir: &Path, r: &mut Reporter) {
    let g = &mut c.gates;
    no_repeats(
        r,
        "gates.preflight",
        &g.preflight,
        |x| x.as_str(),
        "list each gate once",
    );
    if let Some(t) = &mut g.tools {
        positive(r, "gates.tools.batch", t.batch.into(), "the tools batch");
        if t.variants.is_empty() {
            r.error(
                &p("gates.tools.variants"),
                "no variants",
                "list at least one of \"plain\", \"streaming\", \"round-trip\"",
            );
        }
        no_repeats(
            r,
            "gates.tools.variants",
            &t.variants,
            |v| v.as_str(),
            "list each variant once",
        );
        suite(r, &p("gates.tools.suite"), dir, &mut t.suite);
    }
    if let Some(q) = &mut g.quality {
        positive(
            r,
            "gates.quality.repetitions",
            q.repetitions.into(),
            "quality repetitions",
        );
        suite(r, &p("gates.quality.suite"), dir, &mut q.suite);
    }
    if let Some(rt) = &mut g.retrieval {
        if !(1..=12).contains(&rt.needles) {
            r.error(
                &p("gates.retrieval.needles"),
                format!("{} needles", rt.needles),
                "plant 1 to 12 needles",
            );
        }
        positive(
            r,
            "gates.retrieval.max_tokens",
            rt.max_tokens.into(),
            "the retrieval answer's max_tokens",
        );
        if rt.depths.is_empty() {
            let n = rt.needles.max(1);
            rt.depths = (0..n)
                .map(|i| f64::from(i + 1) / f64::from(n + 1))
                .collect();
        } else if rt.depths.len() != rt.needles as usize {
            r.error(
                &p("gates.retrieval.depths"),
                format!("{} depths for {} needles", rt.depths.len(), rt.needles),
                "give one depth per needle, or leave depths out to spread the needles evenly",
            );
        }
        for (i, d) in rt.depths.iter().enumerate() {
            if !(d.is_finite() && (0.0..=1.0).contains(d)) {
                r.error(
                    &p("gates.retrieval.depths").index(i),
                    format!("depth {d} is outside 0..1"),
                    "give depths as fractions of the prompt, 0 = start, 1 = end",
                );
            }
        }
    }
}

/// Checks argv-like lists for shell strings and secrets on the command line.
fn argv_checks(r: &mut Reporter, path: &FieldPath, argv: &[String], is_program: bool) {
    if is_program {
        if argv.is_empty() {
            r.error(
                path,
                "empty argv",
                "give the program and its arguments, e.g. [\"vllm\", \"serve\", \"MODEL\"]",
            );
            return;
        }
        let a0 = &argv[0];
        if a0.trim().is_empty() {
            r.error(
                &path.index(0),
                "empty program",
                "make argv[0] the program to run",
            );
        } else if a0.contains(char::is_whitespace) && (argv.len() == 1 || !Path::new(a0).exists()) {
            let split: Vec<String> = argv
                .iter()
                .flat_map(|a| {
                    a.split_whitespace()
                        .map(|s| format!("{s:?}"))
                        .collect::<Vec<_>>()
                })
                .collect();
            r.error(
                &path.index(0),
                format!(
                    "argv[0] is a shell string ({a0:?}); argv is run directly, never by a shell"
                ),
                format!(
                    "give one element per argument: argv = [{}]",
                    split.join(", ")
                ),
            );
        }
    }
    for (j, a) in argv.iter().enumerate() {
        if matches!(
            a.as_str(),
            "&&" | "||" | "|" | ";" | ">" | ">>" | "<" | "2>&1" | "&"
        ) {
            r.error(
                &path.index(j),
                format!("`{a}` is a shell operator, but argv is not run by a shell"),
                "run one program per arm; put pipelines or redirections in a script and run the script",
            );
            continue;
        }
        let secret_assignment = |s: &str| -> bool {
            s.split_once('=')
                .is_some_and(|(k, v)| is_env_name(k) && looks_secret(k) && !harmless_literal(v))
        };
        if let Some(flag) = a.strip_prefix('-') {
            let flag = flag.trim_start_matches('-');
            if let Some((name, value)) = flag.split_once('=') {
                if (looks_secret(name) && !harmless_literal(value)) || secret_assignment(value) {
                    r.error(
                        &path.index(j),
                        format!("`--{name}=…` puts a secret on the command line (visible to every user in `ps`)"),
                        "pass it in env as { from_env = \"NAME\" } (engines read e.g. VLLM_API_KEY, LLAMA_API_KEY, HF_TOKEN)",
                    );
                }
            } else if looks_secret(flag) {
                if let Some(next) = argv.get(j + 1) {
                    if !next.starts_with('-') && !harmless_literal(next) {
                        r.error(
                            &path.index(j + 1),
                            format!("the value after `{a}` is a secret on the command line (visible to every user in `ps`)"),
                            "remove it and pass the secret in env as { from_env = \"NAME\" } (engines read e.g. VLLM_API_KEY, LLAMA_API_KEY, HF_TOKEN)",
                        );
                    }
                }
            }
        } else if secret_assignment(a) {
            let name = a.split_once('=').map(|(k, _)| k).unwrap_or(a);
            r.error(
                &path.index(j),
                format!("`{name}=…` puts a secret value in the campaign file"),
                format!("use the env table: {name} = {{ from_env = \"{name}\" }}"),
            );
        }
    }
}

fn env_checks(r: &mut Reporter, path: &FieldPath, env: &BTreeMap<String, EnvValue>) {
    for (k, v) in env {
        let at = path.key(k);
        if !is_env_name(k) {
            r.error(
                &at,
                format!("`{k}` is not an environment variable name"),
                "use letters, digits and `_`, not starting with a digit",
            );
        }
        match v {
            EnvValue::FromEnv(name) => {
                if !is_env_name(name) {
                    r.error(
                        &at,
                        format!(
                            "from_env names `{name}`, which is not an environment variable name"
                        ),
                        "give the variable's name, e.g. { from_env = \"HF_TOKEN\" }",
                    );
                }
            }
            EnvValue::Literal(s) => {
                if let Some(rest) = s.strip_prefix('$') {
                    let name = rest.trim_start_matches('{').trim_end_matches('}');
                    r.error(
                        &at,
                        format!("`{s}` is not expanded: bakeoff passes literal values as written"),
                        format!("read it from the environment: {k} = {{ from_env = \"{name}\" }}"),
                    );
                } else if looks_secret(k) && !harmless_literal(s) {
                    r.error(
                        &at,
                        format!("`{k}` looks like a secret and its value is written in the campaign file"),
                        format!("write {k} = {{ from_env = \"{k}\" }} and export {k} before the run; secrets are given only as names of environment variables"),
                    );
                }
            }
        }
    }
}

fn arm(c: &mut Campaign, i: usize, dir: &Path, r: &mut Reporter) {
    let at = p("arms").index(i);
    let lane = c.lane.clone();
    let campaign_id = c.campaign.id.clone();
    let a = &mut c.arms[i];
    let arm_id = a.id.clone();
    if !is_id(&a.id) {
        r.error(
            &at.key("id"),
            format!(
                "`{}` is not a valid arm id (it starts the arm's evidence file names)",
                a.id
            ),
            "use lowercase letters, digits and `-`, e.g. \"vllm-nvfp4-mtp3\"",
        );
    } else if RESERVED_IDS.contains(&a.id.as_str()) {
        r.error(
            &at.key("id"),
            format!("`{}` is reserved (campaign-level evidence uses it)", a.id),
            "choose another id",
        );
    }
    if a.label.trim().is_empty() {
        a.label = a.id.clone();
    }
    for (field, v) in [("engine", &a.engine), ("model", &a.model)] {
        if v.trim().is_empty() {
            r.error(
                &at.key(field),
                format!("empty {field}"),
                format!("describe the arm's {field}"),
            );
        }
    }
    if let Some(t) = &mut a.tokenizer {
        *t = resolve(dir, t);
        if !t.is_file() {
            r.error(
                &at.key("tokenizer"),
                format!("tokenizer {} does not exist", t.display()),
                "give the model's tokenizer.json relative to the campaign file's directory, or leave it out",
            );
        }
    }
    if let Some(k) = &a.api_key_env {
        if !is_env_name(k) {
            r.error(
                &at.key("api_key_env"),
                format!("`{k}` is not an environment variable name"),
                "give the NAME of the variable that holds the key, never the key",
            );
        }
    }
    let tables = a.recipe_tables();
    match tables.len() {
        0 => {
            r.error(
                &at,
                format!("arm `{}` has no recipe", a.id),
                "add exactly one of [arms.process], [arms.container], [arms.endpoint], [arms.reference]",
            );
            return;
        }
        1 => {}
        _ => {
            r.error(
                &at.key(tables[1]),
                format!(
                    "arm `{}` has more than one recipe ({})",
                    a.id,
                    tables.join(", ")
                ),
                "keep exactly one recipe table per arm",
            );
            return;
        }
    }
    if let Some(pr) = &mut a.process {
        let rp = at.key("process");
        argv_checks(r, &rp.key("argv"), &pr.argv, true);
        env_checks(r, &rp.key("env"), &pr.env);
        pr.cwd = if pr.cwd.as_os_str().is_empty() {
            dir.to_path_buf()
        } else {
            resolve(dir, &pr.cwd)
        };
        if !pr.cwd.is_dir() {
            r.error(
                &rp.key("cwd"),
                format!("cwd {} is not a directory", pr.cwd.display()),
                "give a directory relative to the campaign file's directory (or absolute)",
            );
        }
        if let Some(a0) = pr.argv.first_mut() {
            let prog = Path::new(a0.as_str());
            if prog.is_relative() && a0.contains('/') {
                *a0 = resolve(&pr.cwd, prog).display().to_string();
            }
        }
    }
    if let Some(ct) = &mut c.arms[i].container {
        let rp = at.key("container");
        if !pinned(&ct.image) {
            r.error(
                &rp.key("image"),
                format!("image `{}` is not pinned by digest", ct.image),
                "use repository@sha256:<64 hex digits> (docker buildx imagetools inspect IMAGE shows the digest)",
            );
        }
        if ct.docker.trim().is_empty() {
            r.error(
                &rp.key("docker"),
                "empty docker CLI",
                "leave it out for \"docker\"",
            );
        }
        argv_checks(r, &rp.key("args"), &ct.args, false);
        argv_checks(r, &rp.key("run_args"), &ct.run_args, false);
        for (j, ra) in ct.run_args.iter().enumerate() {
            let opt = ra.split('=').next().unwrap_or("");
            if matches!(
                opt,
                "--name"
                    | "--gpus"
                    | "-p"
                    | "--publish"
                    | "-d"
                    | "--detach"
                    | "--rm"
                    | "-e"
                    | "--env"
                    | "-v"
                    | "--volume"
                    | "--label"
                    | "-l"
            ) {
                r.error(
                    &rp.key("run_args").index(j),
                    format!("`{opt}` is set by bakeoff from the recipe"),
                    "use the recipe's fields instead (name, gpus, container_port, env, volumes, labels)",
                );
            }
        }
        env_checks(r, &rp.key("env"), &ct.env);
        if ct.gpus.is_empty() {
            ct.gpus = lane.gpus.clone();
        } else {
            for (j, g) in ct.gpus.iter().enumerate() {
                if !lane.gpus.contains(g) {
                    r.error(
                        &rp.key("gpus").index(j),
                        format!("GPU `{g}` is not one of the lane's GPUs"),
                        "list it in lane.gpus, or use only the lane's GPUs (leave gpus out for all of them)",
                    );
                }
            }
        }
        if ct.container_port == 0 {
            ct.container_port = lane.port;
        }
        for (j, v) in ct.volumes.iter_mut().enumerate() {
            v.host = resolve(dir, &v.host);
            if !v.container.starts_with('/') || v.container.contains(':') {
                r.error(
                    &rp.key("volumes").index(j).key("container"),
                    format!("`{}` is not an absolute container path", v.container),
                    "give an absolute path without `:`, e.g. \"/models\"",
                );
            }
        }
        for k in ct.labels.keys() {
            if k.is_empty()
                || k.contains('=')
                || k.contains(char::is_whitespace)
                || k.starts_with("bakeoff.")
            {
                r.error(
                    &rp.key("labels").key(k),
                    format!("label key `{k}` is not allowed"),
                    "use a key without `=` or spaces; `bakeoff.*` labels are set by bakeoff",
                );
            }
        }
        if ct.name.is_empty() {
            ct.name = format!("bakeoff-{campaign_id}-{arm_id}");
        } else if !ct
            .name
            .chars()
            .next()
            .is_some_and(|ch| ch.is_ascii_alphanumeric())
            || !ct
                .name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '.' | '-'))
        {
            r.error(
                &rp.key("name"),
                format!("`{}` is not a valid container name", ct.name),
                "use letters, digits, `_`, `.` and `-`, starting with a letter or digit",
            );
        }
    }
    let a = &mut c.arms[i];
    if let Some(e) = &mut a.endpoint {
        if e.url.is_empty() {
            e.url = lane.base_url();
        } else if let Err(problem) = crate::client::Target::parse(&e.url) {
            r.error(
                &at.key("endpoint").key("url"),
                problem,
                "give the server root, e.g. \"http://10.0.0.5:8000\"",
            );
        }
    }
    if let Some(rf) = &mut a.reference {
        rf.profile = resolve(dir, &rf.profile);
        match crate::engine::profile::Profile::load(&rf.profile) {
            Err(e) => {
                r.error(
                    &at.key("reference").key("profile"),
                    format!("cannot use the profile: {}", e.to_string().replace('\n', " ")),
                    "give a reference-engine profile relative to the campaign file's directory (docs/reference-engine.md)",
                );
            }
            Ok(prof) => {
                if a.served_model.is_empty() {
                    a.served_model = prof.model.clone();
                } else if a.served_model != prof.model {
                    r.error(
                        &at.key("served_model"),
                        format!(
                            "served_model `{}` differs from the profile's model `{}`",
                            a.served_model, prof.model
                        ),
                        "leave served_model out for a reference arm, or make them match",
                    );
                }
                if a.served_context == 0 {
                    a.served_context = prof.context_tokens;
                } else if a.served_context > prof.context_tokens {
                    r.error(
                        &at.key("served_context"),
                        format!(
                            "served_context {} exceeds the profile's context_tokens {}",
                            a.served_context, prof.context_tokens
                        ),
                        "leave served_context out for a reference arm, or lower it",
                    );
                }
            }
        }
    } else {
        if a.served_model.trim().is_empty() {
            r.error(
                &at.key("served_model"),
                format!("arm `{}` has no served_model", a.id),
                "add served_model = \"…\": the model id /v1/models must list (llama.cpp: the -a alias; vLLM: --served-model-name)",
            );
        }
        if a.served_context == 0 {
            r.error(
                &at.key("served_context"),
                format!("arm `{}` has no served_context", a.id),
                "add served_context = N: the longest prompt + completion one request may use (llama.cpp: -c divided by -np)",
            );
        }
    }
    let need = u64::from(c.workload.matched_prompt_tokens) + u64::from(c.workload.max_tokens);
    let a = &c.arms[i];
    if a.served_context > 0 && need > a.served_context {
        r.error(
            &at.key("served_context"),
            format!(
                "the matched prompt ({}) + max_tokens ({}) = {need} tokens do not fit arm `{}`'s served context of {}",
                c.workload.matched_prompt_tokens, c.workload.max_tokens, a.id, a.served_context
            ),
            "raise served_context or lower workload.matched_prompt_tokens / workload.max_tokens",
        );
    }
    if let Some(s) = &a.speculative {
        if s.method.trim().is_empty() {
            r.error(
                &at.key("speculative").key("method"),
                "empty speculative method",
                "name it, e.g. \"mtp\", \"eagle3\", \"draft-model\"",
            );
        }
    }
}

fn pinned(image: &str) -> bool {
    image.split_once("@sha256:").is_some_and(|(repo, digest)| {
        !repo.is_empty()
            && digest.len() == 64
            && digest
                .chars()
                .all(|ch| ch.is_ascii_digit() || ('a'..='f').contains(&ch))
    })
}

fn across_arms(c: &mut Campaign, r: &mut Reporter) {
    let at = |i: usize| p("arms").index(i);
    if c.arms.is_empty() {
        r.error(
            &p("arms"),
            "no arms",
            "add at least one [[arms]] table (and one of them the incumbent)",
        );
        return;
    }
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, a) in c.arms.iter().enumerate() {
        if let Some(&j) = first.get(a.id.as_str()) {
            r.error(
                &at(i).key("id"),
                format!(
                    "duplicate arm id `{}` (also arms[{j}] on line {})",
                    a.id,
                    r.index.line(&at(j).key("id"))
                ),
                "give every arm a unique id (ids name the evidence files)",
            );
        } else {
            first.insert(&a.id, i);
        }
    }
    let incumbents: Vec<usize> = (0..c.arms.len())
        .filter(|&i| c.arms[i].role == Role::Incumbent)
        .collect();
    match incumbents.as_slice() {
        [] => r.error(
            &p("arms"),
            "no incumbent",
            "give exactly one arm role = \"incumbent\" (what serves today: stopped first, restored last)",
        ),
        [_] => {}
        [i0, rest @ ..] => {
            for &i in rest {
                r.error(
                    &at(i).key("role"),
                    format!(
                        "a second incumbent (`{}`; the first is `{}` on line {})",
                        c.arms[i].id,
                        c.arms[*i0].id,
                        r.index.line(&at(*i0).key("role"))
                    ),
                    "exactly one arm is the incumbent: make the others \"candidate\"",
                );
            }
        }
    }
    // Speculative arms and their matched controls.
    let mut controlled: HashSet<&str> = HashSet::new();
    for (i, a) in c.arms.iter().enumerate() {
        let Some(s) = &a.speculative else { continue };
        let cp = at(i).key("speculative").key("control");
        controlled.insert(s.control.as_str());
        if s.control == a.id {
            r.error(
                &cp,
                format!("arm `{}` names itself as its control", a.id),
                "name the matched arm without speculation",
            );
            continue;
        }
        let Some(ctl) = c.arms.iter().find(|x| x.id == s.control) else {
            r.error(
                &cp,
                format!("control `{}` is not an arm of this campaign", s.control),
                "add the matched no-speculation arm (role = \"control\") or correct the id",
            );
            continue;
        };
        if ctl.speculative.is_some() {
            r.error(
                &cp,
                format!("control `{}` uses speculative decoding itself", ctl.id),
                "a control runs the same model without speculation: remove its [arms.speculative]",
            );
        }
        if ctl.model != a.model
            || ctl.quantization != a.quantization
            || ctl.served_context != a.served_context
        {
            r.error(
                &cp,
                format!(
                    "control `{}` is not matched: model, quantization and served_context must equal arm `{}`'s",
                    ctl.id, a.id
                ),
                "make the control serve the same model, quantization and context, without speculation",
            );
        }
    }
    for (i, a) in c.arms.iter().enumerate() {
        if a.role == Role::Control && !controlled.contains(a.id.as_str()) {
            r.error(
                &at(i).key("role"),
                format!("no speculative arm names `{}` as its control", a.id),
                format!("set speculative.control = \"{}\" on the speculative arm, or make this arm a candidate", a.id),
            );
        }
    }
    // An endpoint incumbent cannot be stopped to free the lane.
    let inc = c.arms.iter().find(|a| a.role == Role::Incumbent);
    if let Some((idx, inc)) =
        inc.map(|a| (c.arms.iter().position(|x| x.id == a.id).unwrap_or(0), a))
    {
        if let Some(e) = &inc.endpoint {
            let loopback = |h: &str| {
                matches!(
                    h.trim_matches(|ch| ch == '[' || ch == ']'),
                    "127.0.0.1" | "localhost" | "::1" | "0.0.0.0"
                )
            };
            let on_lane = crate::client::Target::parse(&e.url).is_ok_and(|t| {
                t.port == c.lane.port
                    && (t.host == c.lane.host || (loopback(&t.host) && loopback(&c.lane.host)))
            });
            let managed = c
                .arms
                .iter()
                .any(|a| a.recipe_tables().len() == 1 && a.kind().managed());
            if on_lane && managed {
                r.error(
                    &at(idx).key("endpoint"),
                    format!("the incumbent `{}` is an already-running endpoint on the lane port, which bakeoff cannot stop to free the lane", inc.id),
                    "give the incumbent a process or container recipe, or move it off the lane port",
                );
            }
        }
    }
}

fn long_context(c: &mut Campaign, r: &mut Reporter) {
    let targets = c.workload.long_context_targets.clone();
    let Some(rg) = c.gates.retrieval.clone() else {
        if !targets.is_empty() {
            r.error(
                &p("workload.long_context_targets"),
                "long-context targets are given but retrieval does not run",
                "add a [gates.retrieval] table, or remove the targets",
            );
        }
        return;
    };
    if targets.is_empty() {
        r.error(
            &p("gates.retrieval"),
            "retrieval runs but workload.long_context_targets is empty",
            "add targets per long-context profile, e.g. long_context_targets = { full = 24000 }",
        );
        return;
    }
    let only = (targets.len() == 1)
        .then(|| targets.keys().next().cloned())
        .flatten();
    for i in 0..c.arms.len() {
        let at = p("arms").index(i);
        let a: &mut Arm = &mut c.arms[i];
        if a.long_context_profile.is_none() {
            a.long_context_profile = only.clone();
        }
        let Some(name) = a.long_context_profile.clone() else {
            r.error(
                &at,
                format!("arm `{}` has no long_context_profile", a.id),
                format!(
                    "add long_context_profile = one of {}",
                    targets
                        .keys()
                        .map(|k| format!("\"{k}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            continue;
        };
        let Some(&tokens) = targets.get(&name) else {
            r.error(
                &at.key("long_context_profile"),
                format!("`{name}` is not a key of workload.long_context_targets"),
                format!(
                    "use one of {}",
                    targets
                        .keys()
                        .map(|k| format!("\"{k}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            continue;
        };
        let need = tokens + u64::from(rg.max_tokens);
        if a.served_context > 0 && need > a.served_context {
            let field = if r.index.contains(&at.key("long_context_profile")) {
                at.key("long_context_profile")
            } else {
                at.key("served_context")
            };
            r.error(
                &field,
                format!(
                    "long-context target `{name}` ({tokens} tokens) + the answer ({} tokens) exceeds arm `{}`'s served_context of {}",
                    rg.max_tokens, a.id, a.served_context
                ),
                "give this arm a smaller (bounded) long-context profile, or lower the target",
            );
        }
    }
}

fn policy(c: &mut Campaign, r: &mut Reporter) {
    let gpus = !c.lane.gpus.is_empty();
    let mut configured: Vec<GateName> = c
        .gates
        .preflight
        .iter()
        .map(|g: &PreflightGate| g.gate())
        .collect();
    if gpus {
        configured.extend([GateName::IdleBaseline, GateName::MemoryReserve]);
    }
    if c.gates.tools.is_some() {
        configured.push(GateName::Tools);
    }
    if c.gates.retrieval.is_some() {
        configured.push(GateName::Retrieval);
    }
    if c.gates.quality.is_some() {
        configured.push(GateName::Quality);
    }
    configured.push(GateName::Restoration);
    let pol = &mut c.policy;
    if pol.required_gates.is_empty() {
        pol.required_gates = configured;
    } else {
        let mut seen = HashSet::new();
        for (i, g) in pol.required_gates.iter().enumerate() {
            let at = p("policy.required_gates").index(i);
            if !seen.insert(*g) {
                r.error(
                    &at,
                    format!("`{}` is listed twice", g.as_str()),
                    "list each gate once",
                );
            } else if !configured.contains(g) {
                let fix = match g {
                    GateName::Smoke | GateName::Json | GateName::Streaming => format!(
                        "add \"{}\" to gates.preflight, or remove it here",
                        g.as_str()
                    ),
                    GateName::IdleBaseline | GateName::MemoryReserve => {
                        "list the lane's GPUs in lane.gpus, or remove it here".to_string()
                    }
                    _ => format!("add a [gates.{}] table, or remove it here", g.as_str()),
                };
                r.error(
                    &at,
                    format!(
                        "gate `{}` is required but does not run in this campaign",
                        g.as_str()
                    ),
                    fix,
                );
            }
        }
    }
    for (i, l) in pol.required_evidence_labels.iter().enumerate() {
        if !is_id(l) {
            r.error(
                &p("policy.required_evidence_labels").index(i),
                format!("`{l}` is not an evidence label"),
                "use lowercase words joined by `-`, e.g. \"matched-performance\", \"exact-restoration\"",
            );
        }
    }
    for (m, tol) in &pol.tie_tolerance {
        let at = p("policy.tie_tolerance").key(m.as_str());
        if !(tol.is_finite() && (0.0..1.0).contains(tol)) {
            r.error(
                &at,
                format!("tolerance {tol} is out of range"),
                "give a relative difference from 0 to below 1, e.g. 0.05 for 5%",
            );
        }
        if !c.workload.ranking_priority.contains(m) {
            r.error(
                &at,
                format!("`{}` is not in workload.ranking_priority", m.as_str()),
                "add it to the ranking priority, or remove its tolerance",
            );
        }
    }
    for (i, q) in pol.quality_risks.iter().enumerate() {
        let at = p("policy.quality_risks").index(i);
        if q.pattern.trim().is_empty() {
            r.error(
                &at.key("pattern"),
                "empty pattern",
                "give a substring of the engine log line to look for",
            );
        }
        if q.limitation.trim().is_empty() {
            r.error(
                &at.key("limitation"),
                "empty limitation",
                "say what the verdict must state when the pattern appears",
            );
        }
    }
}
