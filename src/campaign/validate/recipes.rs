//! Checks of a recipe's command line and environment: no shell strings, no secrets in plain sight,
//! images pinned by digest.

use super::common::{harmless_literal, is_env_name, looks_secret};
use crate::campaign::diag::{FieldPath, Reporter};
use crate::campaign::spec::EnvValue;
use std::collections::BTreeMap;
use std::path::Path;

/// Checks argv-like lists for shell strings and secrets on the command line.
pub(super) fn argv_checks(r: &mut Reporter, path: &FieldPath, argv: &[String], is_program: bool) {
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

pub(super) fn env_checks(r: &mut Reporter, path: &FieldPath, env: &BTreeMap<String, EnvValue>) {
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

pub(super) fn pinned(image: &str) -> bool {
    image.split_once("@sha256:").is_some_and(|(repo, digest)| {
        !repo.is_empty()
            && digest.len() == 64
            && digest
                .chars()
                .all(|ch| ch.is_ascii_digit() || ('a'..='f').contains(&ch))
    })
}
