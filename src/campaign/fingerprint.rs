//! What an arm's recipe depends on beyond its own text: the files it names that define behaviour
//! (a reference profile, a model, a chat template, a config file in argv or env) and the values of
//! its environment. Taken when the incumbent is stopped and again when it is restored; any
//! difference fails the restoration identity, naming the file or variable.
//!
//! Files up to [`FULL_HASH_MAX`] bytes get a full SHA-256; larger ones (model weights) get size,
//! mtime and a SHA-256 of [`SAMPLES`] blocks of [`SAMPLE`] bytes spread over the file (`method`
//! says which). Environment values are never recorded: only `sha256("NAME=value")`.

use super::spec::{Arm, Campaign, EnvValue};
use crate::lane::recipe::Named;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Files up to this size are hashed whole.
pub const FULL_HASH_MAX: u64 = 64 * 1024 * 1024;
/// Bytes per sampled block of a large file.
pub const SAMPLE: u64 = 1024 * 1024;
/// Sampled blocks of a large file (first, evenly spaced, last).
pub const SAMPLES: u64 = 16;

/// One file's digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    pub path: PathBuf,
    /// `sha256` (the whole file) or `size+mtime+sampled-sha256` (large files).
    pub method: String,
    pub size: u64,
    /// Modification time, seconds.nanoseconds since the epoch (recorded for both methods;
    /// compared only for sampled files).
    pub mtime: String,
    pub sha256: String,
}

/// One environment variable of the recipe: its name and the digest of its value in the serving
/// process (`None`: not set there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvDigest {
    pub name: String,
    pub from_env: bool,
    pub sha256: Option<String>,
}

/// What the recipe depended on at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub files: Vec<FileDigest>,
    /// Files the recipe names that could not be read, with why.
    #[serde(default)]
    pub unreadable: Vec<String>,
    /// Files the recipe names that the engine writes (logs, caches), left out, with why.
    #[serde(default)]
    pub not_compared: Vec<String>,
    /// Empty when no serving process could be read (or the recipe sets no variables).
    #[serde(default)]
    pub env: Vec<EnvDigest>,
}

fn hex(d: impl AsRef<[u8]>) -> String {
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Flag and variable name words that mark a file the engine writes (a log, a cache, a dump), not
/// one that defines its behaviour: such files change while the engine runs and are not compared.
const OUTPUT_WORDS: &[&str] = &["log", "out", "save", "dump", "pid", "cache", "trace", "tmp"];

fn names_output(flag: &str) -> bool {
    let f = flag.to_ascii_lowercase();
    OUTPUT_WORDS.iter().any(|w| f.contains(w))
}

/// The files `arm`'s recipe names that exist as regular files: the reference profile; for a
/// process or a Slurm job, the program (when given as a path) and every argument or `--flag=value` value and
/// literal env value that is a file (relative paths against `cwd`); for a container, the host
/// side of its volumes that are files (the image is pinned by digest in the recipe itself).
/// Directories are not walked. Second: files left out because the flag or variable naming them
/// says the engine writes them (`--log-file`, `*_CACHE*`, …), with that name.
pub fn recipe_files(arm: &Arm) -> (Vec<PathBuf>, Vec<String>) {
    let mut cands: Vec<(PathBuf, Option<String>)> = Vec::new();
    match arm.recipe().named_files() {
        Named::Command { argv, env, cwd } => command_files(argv, env, cwd, &mut cands),
        Named::Paths(paths) => cands.extend(paths.into_iter().map(|p| (p, None))),
    }
    let mut out: Vec<PathBuf> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for (c, output) in cands {
        if c.as_os_str().is_empty() || !c.is_file() || seen.contains(&c) {
            continue;
        }
        seen.push(c.clone());
        match output {
            Some(name) => skipped.push(format!(
                "{} (named by `{name}`: a file the engine writes, not compared)",
                c.display()
            )),
            None => out.push(c),
        }
    }
    (out, skipped)
}

/// The candidate files of a command: the program (when given as a path), every argument or
/// `--flag=value` value and literal env value, relative paths against `cwd`; each with the flag
/// or variable that names it when that says the engine writes it.
fn command_files(
    argv: &[String],
    env: &std::collections::BTreeMap<String, EnvValue>,
    cwd: &Path,
    cands: &mut Vec<(PathBuf, Option<String>)>,
) {
    let rel = |s: &str| {
        let path = Path::new(s);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            cwd.join(path)
        }
    };
    let output = |name: &str| names_output(name).then(|| name.to_string());
    for (i, a) in argv.iter().enumerate() {
        if i == 0 && !a.contains('/') {
            continue;
        }
        let prev = if i > 0 { argv[i - 1].as_str() } else { "" };
        let flag_before = if prev.starts_with('-') {
            output(prev)
        } else {
            None
        };
        cands.push((rel(a), flag_before));
        if let Some((k, v)) = a.split_once('=') {
            cands.push((rel(v), output(k)));
        }
    }
    for (k, v) in env {
        if let EnvValue::Literal(s) = v {
            if s.contains('/') || s.contains('.') {
                cands.push((rel(s), output(k)));
            }
        }
    }
}

/// Every file the campaign names that exists, resolved (absolute), each with the field that
/// names it: the recipes' files ([`recipe_files`]), tokenizers, CA files, suites, the dataset.
/// A bundle records their digests when it opens, so a resume or recovery from anywhere, or from
/// a copied bundle, names a file that moved or changed since.
pub fn campaign_files(c: &Campaign) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    let mut add = |p: &Path, by: String| {
        if p.is_file() && !out.iter().any(|(q, _)| q == p) {
            out.push((p.to_path_buf(), by));
        }
    };
    for a in &c.arms {
        for p in recipe_files(a).0 {
            add(&p, format!("arm `{}`'s {} recipe", a.id, a.kind().as_str()));
        }
        if let Some(t) = &a.tokenizer {
            add(t, format!("arm `{}`'s tokenizer", a.id));
        }
        for (f, field) in a.recipe().other_files() {
            add(&f, format!("arm `{}`'s {field}", a.id));
        }
    }
    if let Some(s) = c.gates.tools.as_ref().and_then(|t| t.suite.as_ref()) {
        add(s, "gates.tools.suite".into());
    }
    if let Some(s) = c.gates.quality.as_ref().and_then(|q| q.suite.as_ref()) {
        add(s, "gates.quality.suite".into());
    }
    if let Some(d) = &c.workload.dataset {
        add(&d.path, "workload.dataset.path".into());
    }
    out
}

/// Whether two digests of one file say it is unchanged (the mtime counts for sampled files only).
pub fn same_content(before: &FileDigest, now: &FileDigest) -> bool {
    before.sha256 == now.sha256
        && before.size == now.size
        && before.method == now.method
        && (before.method == "sha256" || before.mtime == now.mtime)
}

/// The digest of one file (see the module doc for the method).
pub fn file_digest(path: &Path) -> std::io::Result<FileDigest> {
    let meta = std::fs::metadata(path)?;
    let size = meta.len();
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| format!("{}.{:09}", d.as_secs(), d.subsec_nanos()))
        .unwrap_or_default();
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let method = if size <= FULL_HASH_MAX {
        std::io::copy(&mut f, &mut h)?;
        "sha256"
    } else {
        h.update(size.to_le_bytes());
        let mut buf = vec![0u8; SAMPLE as usize];
        for i in 0..SAMPLES {
            let at = (size - SAMPLE) * i / (SAMPLES - 1);
            f.seek(SeekFrom::Start(at))?;
            f.read_exact(&mut buf)?;
            h.update(&buf);
        }
        "size+mtime+sampled-sha256"
    };
    Ok(FileDigest {
        path: path.to_path_buf(),
        method: method.into(),
        size,
        mtime,
        sha256: hex(h.finalize()),
    })
}

/// The digest of an environment value, `sha256("NAME=value")`; never the value.
pub fn env_value_digest(name: &str, value: &str) -> String {
    hex(Sha256::digest(format!("{name}={value}").as_bytes()))
}

/// The fingerprint of `arm` now: its files, and (when `environ` is the serving process's
/// environment) the digests of the variables its recipe sets.
pub fn fingerprint(c: &Campaign, arm: &Arm, environ: Option<&[(String, String)]>) -> Fingerprint {
    let (files, not_compared) = recipe_files(arm);
    let mut fp = Fingerprint {
        not_compared,
        ..Default::default()
    };
    for p in files {
        match file_digest(&p) {
            Ok(d) => fp.files.push(d),
            Err(e) => fp.unreadable.push(format!("{}: {e}", p.display())),
        }
    }
    if let (Some(envs), Some(lc)) = (environ, c.launch_command(arm)) {
        // A container's variables live in its config, not in the environment of the process on
        // the lane port (the docker proxy): not compared here.
        let names: Vec<(String, bool)> = if arm.recipe().env_compared() {
            lc.start
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.is_from_env()))
                .collect()
        } else {
            Vec::new()
        };
        for (name, from_env) in names {
            let sha256 = envs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| env_value_digest(&name, v));
            fp.env.push(EnvDigest {
                name,
                from_env,
                sha256,
            });
        }
    }
    fp
}

/// What changed from `before` to `now`, one phrase per file or variable (empty: nothing).
/// Env digests are compared only when both moments recorded them.
pub fn changes(before: &Fingerprint, now: &Fingerprint) -> Vec<String> {
    changes_since(before, now, "the incumbent's stop")
}

/// [`changes`], the moment `before` was taken named by `since` (e.g. "the bake-off's launch").
pub fn changes_since(before: &Fingerprint, now: &Fingerprint, since: &str) -> Vec<String> {
    let short = |s: &str| s.chars().take(12).collect::<String>();
    let mut out = Vec::new();
    for b in &before.files {
        match now.files.iter().find(|n| n.path == b.path) {
            None => out.push(format!(
                "file {} is gone or unreadable since {since}",
                b.path.display()
            )),
            Some(n) => {
                if !same_content(b, n) {
                    out.push(format!(
                        "file {} changed since {since} ({} {}… size {} → {}… size {})",
                        b.path.display(),
                        n.method,
                        short(&b.sha256),
                        b.size,
                        short(&n.sha256),
                        n.size
                    ));
                }
            }
        }
    }
    for n in &now.files {
        if !before.files.iter().any(|b| b.path == n.path) {
            out.push(format!("file {} appeared since {since}", n.path.display()));
        }
    }
    if !before.env.is_empty() && !now.env.is_empty() {
        for b in &before.env {
            let n = now.env.iter().find(|n| n.name == b.name);
            if n.map(|n| &n.sha256) != Some(&b.sha256) {
                out.push(format!(
                    "environment variable {} has another value than at {since} (compared by digest)",
                    b.name
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_is_named_and_large_files_are_sampled() {
        let d = std::env::temp_dir().join(format!("bakeoff-fp-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("profile.toml");
        std::fs::write(&p, "decode_tok_s = 400\n").unwrap();
        let a = Fingerprint {
            files: vec![file_digest(&p).unwrap()],
            ..Default::default()
        };
        assert_eq!(a.files[0].method, "sha256");
        assert!(changes(&a, &a).is_empty());
        std::fs::write(&p, "decode_tok_s = 7\n").unwrap();
        let b = Fingerprint {
            files: vec![file_digest(&p).unwrap()],
            ..Default::default()
        };
        let ch = changes(&a, &b);
        assert_eq!(ch.len(), 1, "{ch:?}");
        assert!(ch[0].contains(&p.display().to_string()), "{ch:?}");
        let gone = changes(&a, &Fingerprint::default());
        assert!(gone[0].contains("gone"), "{gone:?}");
        // A large file: size + mtime + sampled hash.
        let big = d.join("model.bin");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(FULL_HASH_MAX + 3 * SAMPLE).unwrap();
        drop(f);
        let g = file_digest(&big).unwrap();
        assert_eq!(g.method, "size+mtime+sampled-sha256");
        assert_eq!(g.size, FULL_HASH_MAX + 3 * SAMPLE);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn files_a_process_recipe_names_and_the_ones_it_writes() {
        let d = std::env::temp_dir().join(format!("bakeoff-fp-argv-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        for f in [
            "model.gguf",
            "chat.jinja",
            "cfg.yaml",
            "engine.log",
            "server",
        ] {
            std::fs::write(d.join(f), f).unwrap();
        }
        let text = format!(
            r#"id = "a"
role = "incumbent"
engine = "e"
model = "m"
served_model = "m"
served_context = 10
[process]
argv = ["{0}/server", "-m", "model.gguf", "--chat-template-file={0}/chat.jinja", "--log-file", "engine.log", "--port", "8000", "--missing", "nope.bin"]
cwd = "{0}"
env = {{ CONFIG = "cfg.yaml", LOG_PATH = "engine.log" }}
"#,
            d.display()
        );
        let arm: Arm = toml::from_str(&text).unwrap();
        let (files, skipped) = recipe_files(&arm);
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["server", "model.gguf", "chat.jinja", "cfg.yaml"]);
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(skipped[0].contains("engine.log") && skipped[0].contains("--log-file"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn env_digests_never_hold_the_value() {
        let d = env_value_digest("API_KEY", "hunter2");
        assert_eq!(d.len(), 64);
        assert!(!d.contains("hunter2"));
        let before = Fingerprint {
            env: vec![EnvDigest {
                name: "API_KEY".into(),
                from_env: true,
                sha256: Some(d),
            }],
            ..Default::default()
        };
        let mut now = before.clone();
        now.env[0].sha256 = Some(env_value_digest("API_KEY", "s3cr3t-rotated"));
        let ch = changes(&before, &now);
        assert!(ch[0].contains("API_KEY"), "{ch:?}");
        assert!(!ch[0].contains("s3cr3t"));
    }
}
