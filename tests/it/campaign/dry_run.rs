//! The campaign's dry run shows every step and never a secret value; the recipe and argv/env
//! hashes cover the recipe but never a secret's value; the secret-name, token-label and quoting
//! helpers.

use super::spec::{load_example, BASE};
use crate::support::campaign::campaign_file;
use bakeoff::campaign::{self, EnvValue, Mask};
use std::path::Path;

#[test]
fn dry_run_shows_every_step_and_never_a_secret() {
    const SECRET: &str = "s3cr3t-hf-value-9f8e7d6c";
    // SAFETY (edition 2021: safe): no other test reads this variable.
    std::env::set_var("BAKEOFF_TEST_CAMPAIGN_SECRET", SECRET);
    let text = BASE
        .replace(
            "argv = [\"/bin/sleep\", \"1000\"]",
            "argv = [\"/bin/sleep\", \"1000\"]\nenv = { HF_TOKEN = { from_env = \"BAKEOFF_TEST_CAMPAIGN_SECRET\" }, LOG_LEVEL = \"debug\" }",
        )
        // A literal that happens to hold the secret's value: only a mask built from the
        // environment can catch it.
        .replace("\"/bin/sleep\", \"2000\"", &format!("\"/bin/echo\", \"{SECRET}\""))
        .replace(
            "id = \"cand\"\n",
            "id = \"cand\"\napi_key_env = \"BAKEOFF_TEST_CAMPAIGN_SECRET\"\n",
        );
    let w = campaign_file(&text);
    let c = campaign::load(&w.path).unwrap_or_else(|e| panic!("{e}"));
    let p = campaign::plan(&c);

    let plain = p.render(&Mask::none());
    assert!(
        plain.contains("HF_TOKEN=<from $BAKEOFF_TEST_CAMPAIGN_SECRET, masked>"),
        "{plain}"
    );
    assert!(
        plain.contains("LOG_LEVEL=debug"),
        "literal values are shown: {plain}"
    );
    // Without the environment mask, the from_env value itself never appears (it is never read);
    // only the literal pasted into argv does.
    let without_literal = plain.replace(&format!("/bin/echo {SECRET}"), "");
    assert!(!without_literal.contains(SECRET), "{plain}");

    let masked = p.render(&Mask::from_process_env(&c));
    assert!(!masked.contains(SECRET), "a secret value leaked:\n{masked}");
    assert!(masked.contains("/bin/echo <masked>"), "{masked}");

    for s in &p.steps {
        let row = format!("{:>3}. {:<21} {}", s.number, s.kind.name(), s.evidence);
        assert!(
            masked.contains(&row),
            "step row {row:?} missing from:\n{masked}"
        );
    }
    for needle in [
        "campaign spec-test",
        "lane         http://127.0.0.1:18999",
        "start ",
        "/bin/sleep 1000",
        "stop  SIGTERM to the process group",
        "policy",
        "promotion        manual",
        "required gates   smoke, json, streaming, restoration",
    ] {
        assert!(
            masked.contains(needle),
            "{needle:?} missing from:\n{masked}"
        );
    }
    // The campaign's JSON (for the bundle) holds names, never values.
    let json = serde_json::to_string(&c).unwrap();
    assert!(json.contains("{\"from_env\":\"BAKEOFF_TEST_CAMPAIGN_SECRET\"}"));
    assert_eq!(
        json.matches(SECRET).count(),
        1,
        "only the literal argv element: {json}"
    );
}

#[test]
fn hashes_cover_the_recipe_but_never_a_secret_value() {
    let dir = tempfile::tempdir().unwrap();
    let with_in = |dir: &Path, name: &str, argv_tail: &str| {
        let text = BASE.replace(
            "argv = [\"/bin/sleep\", \"1000\"]",
            &format!("argv = [\"/bin/sleep\", \"{argv_tail}\"]\nenv = {{ HF_TOKEN = {{ from_env = \"{name}\" }} }}"),
        );
        let path = dir.join("campaign.toml");
        std::fs::write(&path, text).unwrap();
        let c = campaign::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let inc = c.incumbent().clone();
        (c.recipe_hash(&inc), c.argv_env_hash(&inc), c)
    };
    let with = |name: &str, argv_tail: &str| with_in(dir.path(), name, argv_tail);
    let (r1, a1, c1) = with("BAKEOFF_TEST_HASH_A", "1000");
    let (r2, a2, _) = with("BAKEOFF_TEST_HASH_A", "1000");
    assert_eq!((r1.len(), a1.len()), (64, 64));
    assert_eq!((&r1, &a1), (&r2, &a2), "deterministic");
    // Changing the secret's value changes nothing: it is never read.
    std::env::set_var("BAKEOFF_TEST_HASH_A", "one-value");
    let (r3, a3, _) = with("BAKEOFF_TEST_HASH_A", "1000");
    std::env::set_var("BAKEOFF_TEST_HASH_A", "another-value");
    let (r4, a4, _) = with("BAKEOFF_TEST_HASH_A", "1000");
    assert_eq!((&r3, &a3), (&r4, &a4));
    // Reading HF_TOKEN from another variable changes the recipe, not what the child is given
    // (HF_TOKEN, a secret); another argv changes both.
    let (r5, a5, _) = with("BAKEOFF_TEST_HASH_B", "1000");
    let (r6, a6, _) = with("BAKEOFF_TEST_HASH_A", "1001");
    assert_ne!(r1, r5);
    assert_eq!(a1, a5);
    assert_ne!(r1, r6);
    assert_ne!(a1, a6);
    // The recipe covers the resolved cwd (the file's directory by default); argv/env does not.
    let other = tempfile::tempdir().unwrap();
    let (r7, a7, _) = with_in(other.path(), "BAKEOFF_TEST_HASH_A", "1000");
    assert_ne!(r1, r7);
    assert_eq!(a1, a7);
    // Same encoding as the lane's identity for a process launched unchanged.
    let inc = c1.incumbent();
    let l = c1.launch_command(inc).unwrap();
    let env: Vec<(String, bakeoff::lane::EnvVal)> = l
        .start
        .env
        .iter()
        .map(|(k, v)| {
            let val = match v {
                EnvValue::Literal(s) => bakeoff::lane::EnvVal::literal(s.clone()),
                EnvValue::FromEnv(_) => bakeoff::lane::EnvVal::secret("whatever it holds"),
            };
            (k.clone(), val)
        })
        .collect();
    assert_eq!(bakeoff::lane::argv_env_hash(&l.start.argv, &env), a1);
}

#[test]
fn recipe_hash_is_canonical_json_of_the_arm() {
    let c = load_example("gpu-full.toml");
    let arm = c.arm("vllm-nvfp4-mtp3").unwrap();
    let mut s = String::new();
    campaign::canonical_json(&serde_json::to_value(arm).unwrap(), &mut s);
    assert_eq!(c.recipe_hash(arm), campaign::hex_sha256(s.as_bytes()));
    assert!(
        s.contains("\"env\":{\"HF_TOKEN\":{\"from_env\":\"HF_TOKEN\"}"),
        "{s}"
    );
    let keys: Vec<&str> = ["\"container\"", "\"engine\"", "\"id\"", "\"model\""]
        .into_iter()
        .collect();
    let pos: Vec<usize> = keys.iter().map(|k| s.find(k).unwrap()).collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "keys sorted: {s}");
}

#[test]
fn helpers() {
    use campaign::{looks_secret, shell_quote, token_label};
    for secret in [
        "HF_TOKEN",
        "OPENAI_API_KEY",
        "api-key",
        "--hf-token",
        "DB_PASSWORD",
        "HFTOKEN",
        "CLIENT_SECRET",
    ] {
        assert!(looks_secret(secret.trim_start_matches('-')), "{secret}");
    }
    for plain in [
        "MAX_TOKENS",
        "max-tokens",
        "TOKENIZERS_PARALLELISM",
        "API_KEY_FILE",
        "hf-token-path",
        "KEYBOARD",
        "CUDA_VISIBLE_DEVICES",
    ] {
        assert!(!looks_secret(plain), "{plain}");
    }
    assert_eq!(token_label(256), "256");
    assert_eq!(token_label(3613), "4k");
    assert_eq!(token_label(4096), "4k");
    assert_eq!(token_label(131072), "128k");
    assert_eq!(token_label(1500), "2k");
    assert_eq!(shell_quote("--port"), "--port");
    assert_eq!(shell_quote(""), "''");
    assert_eq!(shell_quote("a b"), "'a b'");
    assert_eq!(shell_quote("it's"), "'it'\\''s'");
}
