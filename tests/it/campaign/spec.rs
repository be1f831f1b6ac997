//! The campaign file: examples load and plan; every kind of error is one line naming the file, the
//! line and the field. The dry run, the recipe hashes and secret masking: `dry_run.rs`.

use bakeoff::campaign::{self, Campaign, EnvValue, Phase, RecipeKind, Role, StepKind};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::support::campaign::{campaign_file, line_of, one_error};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/campaigns")
        .join(name)
}

pub(super) fn load_example(name: &str) -> Campaign {
    let path = example(name);
    campaign::load(&path).unwrap_or_else(|e| panic!("{} does not load:\n{e}", path.display()))
}

/// A valid two-arm campaign (process arms, no GPU); tests edit it to break one thing.
pub(super) const BASE: &str = r#"[campaign]
id = "spec-test"

[lane]
port = 18999

[workload]
ranking_priority = ["ttft", "decode_tokens_per_second"]
matched_prompt_tokens = 100
max_tokens = 10
warm_repetitions = 2
concurrency = [1, 2]

[[arms]]
id = "inc"
role = "incumbent"
engine = "llama.cpp"
model = "m"
served_model = "m-served"
served_context = 4096
[arms.process]
argv = ["/bin/sleep", "1000"]

[[arms]]
id = "cand"
role = "candidate"
engine = "llama.cpp"
model = "m"
served_model = "m-served"
served_context = 4096
[arms.process]
argv = ["/bin/sleep", "2000"]
"#;

#[test]
fn examples_load_and_plan() {
    for name in [
        "reference-dry-run.toml",
        "real-cpu.toml",
        "gpu-full.toml",
        "reference-open-loop.toml",
    ] {
        let c = load_example(name);
        let p = campaign::plan(&c);
        assert!(!p.steps.is_empty());
        // Numbered 1..n, evidence names unique and file-safe.
        let mut seen = HashSet::new();
        for (i, s) in p.steps.iter().enumerate() {
            assert_eq!(s.number, i + 1);
            assert!(
                seen.insert(s.evidence.clone()),
                "{name}: {} twice",
                s.evidence
            );
            assert!(
                s.evidence.ends_with(".json")
                    && s.evidence.chars().all(|ch| ch.is_ascii_lowercase()
                        || ch.is_ascii_digit()
                        || ch == '-'
                        || ch == '.'),
                "{name}: bad evidence name {}",
                s.evidence
            );
        }
        let inc = c.incumbent();
        assert_eq!(
            p.steps[0].kind,
            StepKind::StopIncumbent,
            "{name}: incumbent stop first"
        );
        assert_eq!(p.steps[0].arm.as_deref(), Some(inc.id.as_str()));
        let last = p.steps.last().unwrap();
        assert!(
            matches!(last.kind, StepKind::RestorationPreflight { .. }),
            "{name}"
        );
        assert_eq!(last.evidence, "restoration-preflight.json");
        let n = p.steps.len();
        assert_eq!(p.steps[n - 3].kind, StepKind::RestoreIncumbent);
        assert!(matches!(
            p.steps[n - 2].kind,
            StepKind::RestorationIdentity { .. }
        ));
        // Every arm: ready, cold before warm, every step's file starts with the arm id.
        for arm in &c.arms {
            let steps: Vec<_> = p
                .steps
                .iter()
                .filter(|s| s.phase == Phase::Arm && s.arm.as_deref() == Some(arm.id.as_str()))
                .collect();
            let names: Vec<&str> = steps.iter().map(|s| s.kind.name()).collect();
            assert!(names.contains(&"ready"), "{name}/{}: {names:?}", arm.id);
            if arm.kind().managed() {
                assert_eq!(names.first(), Some(&"launch"), "{name}/{}", arm.id);
                assert_eq!(names.last(), Some(&"stop"), "{name}/{}", arm.id);
            } else {
                assert!(!names.contains(&"launch") && !names.contains(&"stop"));
            }
            let cold = steps
                .iter()
                .position(|s| s.evidence.ends_with("-c1-cold.json"));
            let warm = steps
                .iter()
                .position(|s| s.evidence.ends_with("-c1-warm.json"));
            assert!(
                cold.is_some() && cold < warm,
                "{name}/{}: cold before warm",
                arm.id
            );
            for s in &steps {
                assert!(s.evidence.starts_with(&format!("{}-", arm.id)));
            }
        }
    }
}

#[test]
fn evidence_file_names_follow_arm_step_shape() {
    let c = load_example("reference-dry-run.toml");
    let p = campaign::plan(&c);
    let files = p.evidence_files();
    for f in [
        "incumbent-shutdown.json",
        "baseline-launch.json",
        "baseline-ready.json",
        "baseline-preflight.json",
        "fast-arm-timing-1k-c1-cold.json",
        "fast-arm-timing-1k-c1-warm.json",
        "fast-arm-timing-1k-c4-warm.json",
        "fast-arm-retrieval-24000.json",
        "bounded-16k-retrieval-12000.json",
        "mtp3-tools.json",
        "nospec-quality.json",
        "nospec-stop.json",
        "restoration-launch.json",
        "restoration-identity.json",
        "restoration-preflight.json",
    ] {
        assert!(files.contains(&f), "{f} missing from {files:?}");
    }
    // No GPU in this lane: no idle baseline, no memory reserve.
    assert!(!files
        .iter()
        .any(|f| f.contains("gpu-idle") || f.contains("memory-reserve")));
    // The GPU example has both, the idle baseline right after the incumbent stops.
    let g = campaign::plan(&load_example("gpu-full.toml"));
    assert_eq!(g.steps[1].evidence, "gpu-idle-baseline.json");
    assert!(g
        .evidence_files()
        .contains(&"gguf-incumbent-memory-reserve.json"));
    assert!(g
        .evidence_files()
        .contains(&"vllm-nvfp4-mtp3-timing-4k-c1-warm.json"));
    // The endpoint arm is measured, not managed.
    assert!(!g.evidence_files().contains(&"gateway-fp8-launch.json"));
    assert!(g.evidence_files().contains(&"gateway-fp8-ready.json"));
    // Timing steps carry what the orchestrator needs.
    let warm_c4 = p
        .steps
        .iter()
        .find(|s| s.evidence == "fast-arm-timing-1k-c4-warm.json")
        .unwrap();
    match &warm_c4.kind {
        StepKind::Timing {
            concurrency,
            requests,
            prompt_tokens,
            max_tokens,
            ..
        } => {
            assert_eq!((*concurrency, *requests), (4, 12));
            assert_eq!((*prompt_tokens, *max_tokens), (1024, 128));
        }
        k => panic!("{k:?}"),
    }
    assert_eq!(warm_c4.shape.as_deref(), Some("1k-c4-warm"));
}

#[test]
fn examples_resolve_defaults_and_paths() {
    let c = load_example("reference-dry-run.toml");
    // Reference arms take the served model and context from their profile.
    let b = c.arm("bounded-16k").unwrap();
    assert_eq!(b.served_model, "ref-bounded-16k");
    assert_eq!(b.served_context, 16384);
    assert_eq!(b.kind(), RecipeKind::Reference);
    assert!(b.reference.as_ref().unwrap().profile.is_absolute());
    assert_eq!(
        c.arm("mtp3").unwrap().speculative.as_ref().unwrap().control,
        "nospec"
    );
    assert_eq!(c.arm("nospec").unwrap().role, Role::Control);
    assert!(c
        .campaign
        .output
        .ends_with("target/campaigns/reference-dry-run"));

    let r = load_example("real-cpu.toml");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let p = r.arms[0].process.as_ref().unwrap();
    assert_eq!(
        p.cwd, repo,
        "cwd = \"../..\" resolves against the file's directory"
    );
    assert_eq!(
        Path::new(&p.argv[0]),
        repo.join("target/engines/venv/bin/python")
    );
    assert_eq!(
        p.argv[1], "scripts/xserve.py",
        "other arguments are passed verbatim"
    );
    assert_eq!(
        r.arms[0].long_context_profile.as_deref(),
        Some("slot-4k"),
        "the only profile is the default"
    );
    assert_eq!(r.incumbent().id, "xllamacpp-np2");

    let g = load_example("gpu-full.toml");
    let ct = g.arm("vllm-nvfp4").unwrap().container.as_ref().unwrap();
    assert_eq!(
        ct.gpus, g.lane.gpus,
        "containers default to the lane's GPUs"
    );
    assert_eq!(ct.container_port, 8000);
    assert_eq!(
        ct.name,
        "bakeoff-2026-11-30-qwen3-8b-quant-bakeoff-vllm-nvfp4"
    );
    assert_eq!(
        ct.env.get("HF_TOKEN"),
        Some(&EnvValue::FromEnv("HF_TOKEN".into()))
    );
    assert_eq!(
        g.campaign.output,
        example("runs/2026-11-30-qwen3-8b-quant-bakeoff")
    );
}

#[test]
fn syntax_error_names_file_and_line() {
    let text = BASE.replace(
        "served_context = 4096\n[arms.process]\nargv = [\"/bin/sleep\", \"2000\"]",
        "served_context = \n[arms.process]\nargv = [\"/bin/sleep\", \"2000\"]",
    );
    let msg = one_error(&text, ("served_context = ", 1), "TOML syntax");
    assert!(msg.contains("fix the TOML syntax"), "{msg}");
}

#[test]
fn unknown_field_names_the_field() {
    let text = BASE.replace(
        "served_model = \"m-served\"\n",
        "servd_model = \"m-served\"\n",
    );
    // serde stops at the first unknown field: arms[0].
    let msg = one_error(&text, ("servd_model", 0), "arms[0].servd_model");
    assert!(msg.contains("unknown field `servd_model`"), "{msg}");
    assert!(
        msg.contains("served_model"),
        "lists the allowed fields: {msg}"
    );
}

#[test]
fn unknown_field_in_a_nested_table() {
    let text = BASE.replace(
        "[lane]\nport = 18999\n",
        "[lane]\nport = 18999\ngpu = [\"GPU-1\"]\n",
    );
    let msg = one_error(&text, ("gpu = ", 0), "lane.gpu");
    assert!(
        msg.contains("remove `gpu` or correct its spelling"),
        "{msg}"
    );
}

#[test]
fn recipe_field_under_the_arm_points_at_the_recipe_table() {
    let text = BASE.replace(
        "served_context = 4096\n[arms.process]\nargv = [\"/bin/sleep\", \"1000\"]",
        "served_context = 4096\nargv = [\"/bin/sleep\", \"1000\"]\n[arms.process]\nargv = [\"/bin/sleep\", \"1000\"]",
    );
    let msg = one_error(&text, ("argv = ", 0), "arms[0].argv");
    assert!(msg.contains("[arms.process]"), "{msg}");
}

#[test]
fn wrong_type_names_the_field() {
    let text = BASE.replace("port = 18999", "port = \"eighteen\"");
    let msg = one_error(&text, ("port = ", 0), "lane.port");
    assert!(msg.contains("1 to 65535"), "{msg}");
    let text = BASE.replace("port = 18999", "port = 70000");
    one_error(&text, ("port = ", 0), "lane.port");
    let text = BASE.replace("max_tokens = 10", "max_tokens = -1");
    one_error(&text, ("max_tokens = ", 0), "workload.max_tokens");
}

#[test]
fn missing_field_names_the_field_and_its_table() {
    let text = BASE.replacen("model = \"m\"\n", "", 1);
    let msg = one_error(&text, ("[[arms]]", 0), "arms[0].model");
    assert!(
        msg.contains("missing field `model`") && msg.contains("add `model"),
        "{msg}"
    );
}

#[test]
fn duplicate_arm_id() {
    let text = BASE.replace("id = \"cand\"", "id = \"inc\"");
    let msg = one_error(&text, ("id = \"inc\"", 1), "arms[1].id");
    let first = line_of(&text, "id = \"inc\"", 0);
    assert!(
        msg.contains(&format!(
            "duplicate arm id `inc` (also arms[0] on line {first})"
        )),
        "{msg}"
    );
}

#[test]
fn two_incumbents() {
    let text = BASE.replace("role = \"candidate\"", "role = \"incumbent\"");
    let msg = one_error(&text, ("role = \"incumbent\"", 1), "arms[1].role");
    assert!(msg.contains("second incumbent"), "{msg}");
}

#[test]
fn no_incumbent() {
    let text = BASE.replace("role = \"incumbent\"", "role = \"candidate\"");
    let msg = one_error(&text, ("[[arms]]", 0), "arms");
    assert!(msg.contains("no incumbent"), "{msg}");
}

#[test]
fn missing_control() {
    let text = BASE.replace(
        "id = \"cand\"\nrole = \"candidate\"\n",
        "id = \"cand\"\nrole = \"candidate\"\nspeculative = { method = \"mtp\", control = \"nospec\" }\n",
    );
    let msg = one_error(&text, ("speculative = ", 0), "arms[1].speculative.control");
    assert!(msg.contains("control `nospec` is not an arm"), "{msg}");
}

#[test]
fn control_must_be_matched_and_without_speculation() {
    let text = BASE.replace(
        "id = \"cand\"\nrole = \"candidate\"\n",
        "id = \"cand\"\nrole = \"candidate\"\nspeculative = { method = \"mtp\", control = \"cand\" }\n",
    );
    let msg = one_error(&text, ("speculative = ", 0), "arms[1].speculative.control");
    assert!(msg.contains("names itself"), "{msg}");
    // A control that serves another model is not matched.
    let text = BASE
        .replace(
            "id = \"cand\"\nrole = \"candidate\"\n",
            "id = \"cand\"\nrole = \"candidate\"\nspeculative = { method = \"mtp\", control = \"inc\" }\n",
        )
        .replacen("model = \"m\"", "model = \"other\"", 1);
    let msg = one_error(&text, ("speculative = ", 0), "arms[1].speculative.control");
    assert!(msg.contains("not matched"), "{msg}");
}

#[test]
fn literal_secret_in_env() {
    let text = BASE.replace(
        "argv = [\"/bin/sleep\", \"1000\"]",
        "argv = [\"/bin/sleep\", \"1000\"]\nenv = { HF_TOKEN = \"hf_abcdef123456\", MAX_TOKENS = \"32\", TOKENIZERS_PARALLELISM = \"false\" }",
    );
    let msg = one_error(&text, ("HF_TOKEN", 0), "arms[0].process.env.HF_TOKEN");
    assert!(
        msg.contains("HF_TOKEN = { from_env = \"HF_TOKEN\" }"),
        "{msg}"
    );
    assert!(
        !msg.contains("hf_abcdef123456"),
        "the error repeats the secret: {msg}"
    );
    // A `$NAME` literal is not expanded: say so.
    let text = BASE.replace(
        "argv = [\"/bin/sleep\", \"1000\"]",
        "argv = [\"/bin/sleep\", \"1000\"]\n[arms.process.env]\nOPENAI_BASE = \"$BASE_URL\"",
    );
    let msg = one_error(&text, ("OPENAI_BASE", 0), "arms[0].process.env.OPENAI_BASE");
    assert!(msg.contains("from_env = \"BASE_URL\""), "{msg}");
}

#[test]
fn secret_on_the_command_line() {
    let text = BASE.replace(
        "argv = [\"/bin/sleep\", \"1000\"]",
        "argv = [\"/bin/sleep\", \"--max-tokens\", \"32\",\n  \"--api-key\", \"sk-live-123456\"]",
    );
    let msg = one_error(&text, ("--api-key", 0), "arms[0].process.argv[4]");
    assert!(msg.contains("from_env"), "{msg}");
    assert!(!msg.contains("sk-live-123456"), "{msg}");
}

#[test]
fn unpinned_image() {
    let text = BASE.replace(
        "[arms.process]\nargv = [\"/bin/sleep\", \"2000\"]",
        "[arms.container]\nimage = \"vllm/vllm-openai:latest\"",
    );
    let msg = one_error(&text, ("image = ", 0), "arms[1].container.image");
    assert!(
        msg.contains("not pinned by digest") && msg.contains("@sha256:"),
        "{msg}"
    );
}

#[test]
fn shell_string_argv() {
    let text = BASE.replace(
        "argv = [\"/bin/sleep\", \"1000\"]",
        "argv = [\"python3 -m vllm.entrypoints.openai.api_server --port 18999\"]",
    );
    let msg = one_error(&text, ("python3 -m", 0), "arms[0].process.argv[0]");
    assert!(msg.contains("shell string"), "{msg}");
    assert!(
        msg.contains(
            r#"argv = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--port", "18999"]"#
        ),
        "{msg}"
    );
}

#[test]
fn context_overflow() {
    // The matched prompt + max_tokens exceed one arm's served context.
    let text = BASE.replacen("served_context = 4096", "served_context = 64", 1);
    let msg = one_error(&text, ("served_context = 64", 0), "arms[0].served_context");
    assert!(msg.contains("do not fit"), "{msg}");
    // A long-context target beyond an arm's served context.
    let text = format!(
        "{}\n[gates.retrieval]\nneedles = 1\ndepths = [0.5]\n",
        BASE.replace(
            "concurrency = [1, 2]\n",
            "concurrency = [1, 2]\nlong_context_targets = { full = 8000, small = 3000 }\n",
        )
        .replace(
            "id = \"cand\"\n",
            "id = \"cand\"\nlong_context_profile = \"small\"\n",
        )
        .replace(
            "id = \"inc\"\n",
            "id = \"inc\"\nlong_context_profile = \"full\"\n",
        )
    );
    let msg = one_error(
        &text,
        ("long_context_profile = \"full\"", 0),
        "arms[0].long_context_profile",
    );
    assert!(msg.contains("exceeds") && msg.contains("4096"), "{msg}");
}

#[test]
fn semantic_errors_are_all_reported_one_line_each_in_file_order() {
    let text = BASE
        .replace("id = \"spec-test\"", "id = \"Spec Test\"")
        .replace("id = \"cand\"", "id = \"inc\"")
        .replace("max_tokens = 10", "max_tokens = 0");
    let w = campaign_file(&text);
    let err = campaign::load(&w.path).unwrap_err();
    let lines: Vec<String> = err.to_string().lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let f = w.path.display().to_string();
    assert!(
        lines[0].starts_with(&format!("{f}:2: campaign.id: ")),
        "{lines:#?}"
    );
    assert!(lines[1].starts_with(&format!(
        "{f}:{}: workload.max_tokens: ",
        line_of(&text, "max_tokens", 0)
    )));
    assert!(lines[2].starts_with(&format!(
        "{f}:{}: arms[1].id: ",
        line_of(&text, "id = \"inc\"", 1)
    )));
}

#[test]
fn unreadable_file() {
    let err = campaign::load(Path::new("/nonexistent/campaign.toml")).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("/nonexistent/campaign.toml: file: cannot read"),
        "{msg}"
    );
    assert!(!msg.contains('\n'));
}

#[test]
fn endpoint_incumbent_on_the_lane_port_cannot_be_stopped() {
    let text = BASE.replace(
        "[arms.process]\nargv = [\"/bin/sleep\", \"1000\"]",
        "[arms.endpoint]\nurl = \"http://127.0.0.1:18999\"",
    );
    let msg = one_error(&text, ("[arms.endpoint]", 0), "arms[0].endpoint");
    assert!(msg.contains("cannot stop"), "{msg}");
}

fn endpoint(body: &str) -> String {
    BASE.replace(
        "[arms.process]\nargv = [\"/bin/sleep\", \"2000\"]",
        &format!("[arms.endpoint]\n{body}"),
    )
}

#[test]
fn endpoint_url_is_http_or_https_and_its_tls_settings_are_checked() {
    // https loads (the system CA store by default; insecure when asked).
    for body in [
        "url = \"https://10.0.0.7:8000\"",
        "url = \"https://gw.example/openai/v1\"\ninsecure = true",
    ] {
        let w = campaign_file(&endpoint(body));
        let c = campaign::load(&w.path).unwrap_or_else(|e| panic!("{body}: {e}"));
        let e = c.arms[1].endpoint.as_ref().unwrap();
        assert!(e.url.starts_with("https://"));
    }
    let msg = one_error(
        &endpoint("url = \"ftp://10.0.0.7:8000\""),
        ("url = ", 0),
        "arms[1].endpoint.url",
    );
    assert!(msg.contains("http:// or https://"), "{msg}");
    // TLS settings on a plain http URL.
    let msg = one_error(
        &endpoint("url = \"http://10.0.0.7:8000\"\ninsecure = true"),
        ("insecure = ", 0),
        "arms[1].endpoint.insecure",
    );
    assert!(msg.contains("https:// URLs only"), "{msg}");
    // Both at once.
    let msg = one_error(
        &endpoint("url = \"https://10.0.0.7:8000\"\nca_file = \"ca.pem\"\ninsecure = true"),
        ("insecure = ", 0),
        "arms[1].endpoint.insecure",
    );
    assert!(msg.contains("contradict"), "{msg}");
    // A CA file that is missing, or not PEM, names the resolved file.
    let msg = one_error(
        &endpoint("url = \"https://10.0.0.7:8000\"\nca_file = \"missing-ca.pem\""),
        ("ca_file = ", 0),
        "arms[1].endpoint.ca_file",
    );
    assert!(
        msg.contains("cannot read the CA file") && msg.contains("missing-ca.pem"),
        "{msg}"
    );
    let text = endpoint("url = \"https://10.0.0.7:8000\"\nca_file = \"ca.pem\"");
    let w = campaign_file(&text);
    std::fs::write(w.path.with_file_name("ca.pem"), "not a certificate\n").unwrap();
    let err = campaign::load(&w.path).unwrap_err().to_string();
    assert!(
        err.contains("arms[1].endpoint.ca_file") && err.contains("holds no certificate"),
        "{err}"
    );
}

#[test]
fn retrieval_depths_default_to_evenly_spread() {
    let text = format!(
        "{}\n[gates.retrieval]\nneedles = 3\n",
        BASE.replace(
            "concurrency = [1, 2]\n",
            "concurrency = [1, 2]\nlong_context_targets = { short = 2000 }\n",
        )
    );
    let w = campaign_file(&text);
    let c = campaign::load(&w.path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        c.gates.retrieval.as_ref().unwrap().depths,
        vec![0.25, 0.5, 0.75]
    );
    assert_eq!(c.arms[1].long_context_profile.as_deref(), Some("short"));
    assert!(campaign::plan(&c)
        .evidence_files()
        .contains(&"cand-retrieval-2000.json"));
}

#[test]
fn max_failed_fraction_is_a_fraction() {
    let text = format!("{BASE}\n[policy]\nmax_failed_fraction = 1.5\n");
    let e = one_error(
        &text,
        ("max_failed_fraction", 0),
        "policy.max_failed_fraction",
    );
    assert!(e.contains("fraction 1.5 is out of range"), "{e}");
    assert!(e.contains("from 0 to 1"), "{e}");
    let w = campaign_file(&format!("{BASE}\n[policy]\nmax_failed_fraction = 0.02\n"));
    let c = campaign::load(&w.path).unwrap();
    assert_eq!(c.policy.max_failed_fraction, 0.02);
    assert_eq!(
        load_example("reference-dry-run.toml")
            .policy
            .max_failed_fraction,
        0.0
    );
}

#[test]
fn too_few_warm_repetitions_for_a_95_percent_interval_is_a_warning_naming_the_line() {
    // BASE: 2 warm repetitions, ranked on TTFT then decode: it loads, with one warning.
    let w = campaign_file(BASE);
    let c = campaign::load(&w.path).expect("a warning is not an error");
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    let line = line_of(&w.text, "warm_repetitions", 0);
    let want = format!("{}:{line}: workload.warm_repetitions: ", w.path.display());
    assert!(c.warnings[0].starts_with(&want), "{}", c.warnings[0]);
    assert!(
        c.warnings[0].contains("2 warm repetitions cannot support a 95 % interval of a median (it needs 6; the range of 2 covers the median 50.00 %), so the tie rule on ttft, decode_tokens_per_second will compare ranges")
            && c.warnings[0].contains("set warm_repetitions = 6 or more"),
        "{}",
        c.warnings[0]
    );
    // 6 repetitions support a 96.88 % interval: no warning.
    let c = campaign::load(
        &campaign_file(&BASE.replace("warm_repetitions = 2", "warm_repetitions = 6")).path,
    )
    .unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    // No ranking metric compares medians (usable context, concurrency): nothing to warn about.
    let c = campaign::load(
        &campaign_file(&BASE.replace(
            r#"ranking_priority = ["ttft", "decode_tokens_per_second"]"#,
            r#"ranking_priority = ["usable_context_and_kv", "concurrency"]"#,
        ))
        .path,
    )
    .unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}
