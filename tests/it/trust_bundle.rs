//! Trusting a bundle (issue 10): real reference-engine campaigns, then every tampering the issue
//! lists makes `verify` fail naming the right file; an edited campaign-result.json makes `report`
//! refuse (and with `--force` the verdict comes from the step files); a cached and an uncached
//! campaign are refused by `compare`, and the cached win is a limitation; `compare
//! --fail-on-regression` exits non-zero on a slower campaign.

use crate::support::campaign::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::exclusive as serial;

/// Runs a two-arm campaign (`inc`, `fast`) and returns its bundle copied out of the temp dir,
/// with the run's stdout+stderr.
fn campaign(
    inc: &str,
    fast: &str,
    workload_extra: &str,
    keep: &Path,
    name: &str,
) -> (PathBuf, String) {
    let t = Camp::new();
    t.profile("inc", inc);
    t.profile("fast", fast);
    let file = t.write(&[("inc", "inc"), ("fast", "fast")], "", "");
    let toml = std::fs::read_to_string(&file).unwrap().replace(
        "long_context_targets = { full = 600 }",
        &format!("long_context_targets = {{ full = 600 }}\n{workload_extra}"),
    );
    std::fs::write(&file, toml).unwrap();
    let (b, out) = t.run_ok_text("inc", &file);
    assert!(
        !out.contains("could not be written"),
        "the run's own bundle was refused: {out}"
    );
    let dst = keep.join(name);
    copy_dir(&b, &dst);
    (dst, out)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn bakeoff(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn verify_out(dir: &Path, extra: &[&str]) -> Output {
    let mut a = vec!["verify", dir.to_str().unwrap()];
    a.extend_from_slice(extra);
    bakeoff(&a)
}

fn edit_json(p: &Path, f: impl FnOnce(&mut Value)) {
    let mut v = json(p);
    f(&mut v);
    std::fs::write(p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// Asserts `verify` fails and its report's problem lines name `file` (first word after the
/// problem's kind).
fn fails_naming(dir: &Path, file: &str, what: &str) {
    let o = verify_out(dir, &[]);
    let out = text(&o);
    assert!(!o.status.success(), "{what}: verify passed\n{out}");
    assert!(
        String::from_utf8_lossy(&o.stdout).lines().any(|l| l
            .split_once(": ")
            .is_some_and(|(_, rest)| rest.starts_with(file))),
        "{what}: no problem line names {file}\n{out}"
    );
    // `--json`: the same problems, each with its kind and file.
    let d = crate::support::json_doc::doc(&verify_out(dir, &["--json"]));
    assert_eq!(d["ok"], false, "{d:#}");
    assert!(
        d["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["file"] == file),
        "{what}: no problem names {file}\n{d:#}"
    );
}

fn reseal(dir: &Path) {
    bakeoff::evidence::manifest::write(dir).unwrap();
}

const INC: &str = "ttft_ms = 10\ndecode_tok_s = 400\ncontext_tokens = 4096";
const FAST: &str = "ttft_ms = 5\ndecode_tok_s = 600\ncontext_tokens = 4096";

#[test]
fn tampering_is_caught_and_the_verdict_comes_from_the_step_files() {
    let _g = serial();
    let keep = tempfile::tempdir().unwrap();
    let (b, out) = campaign(INC, FAST, "", keep.path(), "a");
    // The run prints the root digest; verify accepts it and refuses another.
    let digest = out
        .lines()
        .find_map(|l| l.strip_prefix("bakeoff run: root digest "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no root digest printed\n{out}"))
        .to_string();
    assert_eq!(digest.len(), 64, "{digest}");
    assert!(verify_out(&b, &["--digest", &digest]).status.success());
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(
        r["workload"]["allow_prefix_cache"], false,
        "{:#}",
        r["workload"]
    );
    assert_eq!(r["workload"]["api"], "chat");
    let s = json(&b.join("decision-summary.json"));
    let winner = s["decision"]["winner"].clone();
    let fresh = |name: &str| {
        let d = keep.path().join(name);
        copy_dir(&b, &d);
        d
    };

    // 1. An edited TTFT in campaign-result.json.
    let d = fresh("ttft");
    let rp = d.join("campaign-result.json");
    let true_ttft = r["arms"][0]["warm"]["ttft_ms"]["p50"].as_f64().unwrap();
    let warm_file = r["arms"][0]["warm"]["evidence"]
        .as_str()
        .unwrap()
        .to_string();
    edit_json(&rp, |v| {
        v["arms"][0]["warm"]["ttft_ms"]["p50"] = 0.001.into()
    });
    fails_naming(&d, "campaign-result.json", "edited TTFT");
    let o = bakeoff(&["report", d.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "report accepted it: {}", text(&o));
    assert!(text(&o).contains("campaign-result.json"), "{}", text(&o));
    // `--json`: the error document (a bundle that does not verify is a failure, not a refusal).
    let e = crate::support::json_doc::doc(&o);
    assert_eq!(
        (&e["command"], &e["refused"]),
        (&"report".into(), &false.into())
    );
    // Even re-sealed (the manifest rewritten to match), the step file disagrees: refused.
    reseal(&d);
    assert!(verify_out(&d, &[]).status.success());
    assert!(!verify_out(&d, &["--digest", &digest]).status.success());
    let o = bakeoff(&["report", d.to_str().unwrap()]);
    let t = text(&o);
    assert!(!o.status.success(), "report accepted it: {t}");
    assert!(t.contains(&warm_file) && t.contains("ttft_ms"), "{t}");
    // With --force the step file wins: the verdict is the true one, the mismatch a limitation.
    let o = bakeoff(&["report", d.to_str().unwrap(), "--force", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let s2 = json(&d.join("decision-summary.json"));
    assert_eq!(s2["decision"]["winner"], winner);
    // `--json`: the verdict rendered, the limitation `--force` added, the new root digest.
    let rd = crate::support::json_doc::doc(&o);
    assert_eq!(
        (&rd["forced"], &rd["winner"]),
        (&true.into(), &s2["decision"]["winner_arm"])
    );
    assert!(
        !rd["forced_limitations"].as_array().unwrap().is_empty(),
        "{rd:#}"
    );
    assert_eq!(
        rd["root_digest"],
        json(&d.join("artifact-manifest.json"))["root_sha256"]
    );
    let lim = s2.to_string();
    assert!(
        lim.contains("--force") && lim.contains(&warm_file),
        "{s2:#}"
    );
    let id = r["arms"][0]["id"].as_str().unwrap();
    let head = s2["headline_results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["arm"] == id)
        .unwrap_or_else(|| panic!("{id} not in the headline: {s2:#}"))
        .clone();
    let t = head["ttft_p50_ms"].as_f64().unwrap();
    assert!(
        (t - true_ttft).abs() < 0.06,
        "headline {t} vs step file {true_ttft}"
    );

    // 2. The manifest's `bytes` field.
    let d = fresh("bytes");
    edit_json(&d.join("artifact-manifest.json"), |v| {
        v["files"][0]["bytes"] = 1.into()
    });
    fails_naming(&d, "artifact-manifest.json", "bytes");
    // 3. Its bakeoff_version.
    let d = fresh("version");
    edit_json(&d.join("artifact-manifest.json"), |v| {
        v["bakeoff_version"] = "0.0.0-edited".into()
    });
    fails_naming(&d, "artifact-manifest.json", "bakeoff_version");
    // 4. A changed hash in the manifest: the manifest, not the data file.
    let d = fresh("hash");
    edit_json(&d.join("artifact-manifest.json"), |v| {
        v["files"][0]["sha256"] = "0".repeat(64).into()
    });
    fails_naming(&d, "artifact-manifest.json", "hash in the manifest");
    let o = verify_out(&d, &[]);
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("changed: "),
        "a data file was blamed: {}",
        text(&o)
    );
    // 5. A hidden file.
    let d = fresh("hidden");
    std::fs::write(d.join(".x.json"), b"{}").unwrap();
    fails_naming(&d, ".x.json", "hidden file");
    // 6. A symlink.
    let d = fresh("link");
    std::os::unix::fs::symlink("/etc/hostname", d.join("extra.json")).unwrap();
    fails_naming(&d, "extra.json", "symlink");
    // 7. A file deleted together with its manifest entry (and the manifest re-sealed).
    let d = fresh("deleted");
    std::fs::remove_file(d.join(&warm_file)).unwrap();
    edit_json(&d.join("artifact-manifest.json"), |v| {
        v["files"]
            .as_array_mut()
            .unwrap()
            .retain(|e| e["path"] != warm_file.as_str())
    });
    fails_naming(&d, "artifact-manifest.json", "deleted with its entry");
    reseal(&d);
    fails_naming(&d, &warm_file, "deleted with its entry, re-sealed");
    // Gate counts and long-context figures are cross-checked too (re-sealed: only the
    // cross-check can catch them).
    let gate = r["arms"][1]["gates"]
        .as_array()
        .unwrap()
        .iter()
        .position(|g| g["name"] == "tools")
        .expect("a tools gate");
    let gate_file = r["arms"][1]["gates"][gate]["evidence"]
        .as_str()
        .unwrap()
        .to_string();
    let lc_file = r["arms"][1]["long_context"]["evidence"]
        .as_str()
        .unwrap()
        .to_string();
    type Edit = Box<dyn Fn(&mut Value)>;
    let edits: Vec<(&str, &str, Edit)> = vec![
        (
            "gate passed",
            gate_file.as_str(),
            Box::new(move |v: &mut Value| v["arms"][1]["gates"][gate]["passed"] = 0.into()),
        ),
        (
            "gate status",
            gate_file.as_str(),
            Box::new(move |v: &mut Value| v["arms"][1]["gates"][gate]["status"] = "failed".into()),
        ),
        (
            "long-context decode",
            lc_file.as_str(),
            Box::new(|v: &mut Value| v["arms"][1]["long_context"]["decode_tok_s"] = 1e6.into()),
        ),
        (
            "failed requests",
            r["arms"][1]["concurrency"]["2"]["evidence"]
                .as_str()
                .unwrap(),
            Box::new(|v: &mut Value| {
                v["arms"][1]["concurrency"]["2"]["requests_failed"] = 3.into()
            }),
        ),
    ];
    for (what, file, f) in edits {
        let d = fresh(&what.replace(' ', "-"));
        edit_json(&d.join("campaign-result.json"), |v| f(v));
        reseal(&d);
        let o = bakeoff(&["report", d.to_str().unwrap()]);
        assert!(
            !o.status.success(),
            "{what}: report accepted it: {}",
            text(&o)
        );
        assert!(
            text(&o).contains(file),
            "{what}: {file} not named: {}",
            text(&o)
        );
    }

    // 8. A data file edited: that file.
    let d = fresh("data");
    edit_json(&d.join(&warm_file), |v| v["stats"]["ok"] = 99.into());
    fails_naming(&d, &warm_file, "edited step file");
}

#[test]
fn compare_refuses_unlike_and_unverified_bundles_and_gates_on_regressions() {
    let _g = serial();
    let keep = tempfile::tempdir().unwrap();
    let (a, _) = campaign(INC, FAST, "", keep.path(), "a");
    let (slow, _) = campaign(
        INC,
        "ttft_ms = 40\ndecode_tok_s = 200\ncontext_tokens = 4096",
        "",
        keep.path(),
        "slow",
    );
    let cached_prof = |p: &str| format!("{p}\nprefix_cache = true");
    let (cached, _) = campaign(
        &cached_prof(INC),
        &cached_prof(FAST),
        "allow_prefix_cache = true",
        keep.path(),
        "cached",
    );
    let (sa, ss, sc) = (
        a.to_str().unwrap(),
        slow.to_str().unwrap(),
        cached.to_str().unwrap(),
    );

    // Cached vs uncached: refused, naming the difference.
    let o = bakeoff(&["compare", sa, sc]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("prefix cache"), "{}", text(&o));
    // The cached campaign's verdict states each arm's cached share and that the win rests on it.
    let r = json(&cached.join("campaign-result.json"));
    assert_eq!(r["workload"]["allow_prefix_cache"], true);
    let s = json(&cached.join("decision-summary.json"));
    let st = s.to_string();
    assert!(st.contains("Cached share of timed prompt tokens"), "{s:#}");
    assert!(st.contains("rests on cached tokens"), "{s:#}");
    for l in s["limitations"].as_array().into_iter().flatten() {
        eprintln!("cached campaign limitation: {l}");
    }

    // Like workloads: compared; labels carry the run time; JSON output.
    let o = bakeoff(&["compare", sa, ss, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_ne!(
        v["a"], v["b"],
        "two runs of one campaign must be told apart: {v:#}"
    );
    assert!(
        v["a"].as_str().unwrap().contains("test-campaign (run "),
        "{v:#}"
    );
    assert!(!v["rows"].as_array().unwrap().is_empty());
    let o = bakeoff(&[
        "compare",
        sa,
        ss,
        "--label-a",
        "before",
        "--label-b",
        "after",
    ]);
    assert!(
        text(&o).contains("compare A = before with B = after"),
        "{}",
        text(&o)
    );

    // The slower copy regresses beyond 10 %: exit non-zero; A against itself passes.
    let o = bakeoff(&["compare", sa, ss, "--fail-on-regression", "10"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("regression: fast ttft_ms"),
        "{}",
        text(&o)
    );
    let v: Value = serde_json::from_slice(
        &bakeoff(&["compare", sa, ss, "--json", "--fail-on-regression", "10"]).stdout,
    )
    .unwrap();
    assert!(
        v["regressions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["arm"] == "fast" && r["metric"] == "ttft" && r["inside_cis"] == false),
        "{v:#}"
    );
    eprintln!("{}", String::from_utf8_lossy(&o.stdout));
    let o = bakeoff(&["compare", sa, sa, "--fail-on-regression", "10"]);
    assert!(o.status.success(), "{}", text(&o));
    // A flag refused before either bundle is read: exit 2.
    let o = bakeoff(&["compare", sa, sa, "--fail-on-regression", "-1"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));

    // An unverified bundle is refused.
    std::fs::write(slow.join(".x.json"), b"{}").unwrap();
    let o = bakeoff(&["compare", sa, ss]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains(".x.json"), "{}", text(&o));
}
