//! Energy and cost per million output tokens in a campaign (docs/metrics.md): reference-engine
//! arms on a lane whose GPU is read through a stand-in `nvidia-smi` (the sampler's own fixture
//! format, the two-H200 CSV), priced by `[lane] cost_per_hour`. With readings the figures land
//! in `arm-stats.csv`, `decision-summary.json`, `publication-summary.md` and `report.html` and
//! rank, and each capacity probe carries its own (recomputed when the bundle is read); a host
//! whose driver answers nothing leaves energy "not measured" (empty cells, `null`),
//! the arms unranked on it. A campaign that could never measure them is refused at load.
//!
//! The stand-in is found on `PATH` after NVML fails, as on a host without the NVIDIA driver (CI);
//! on a host with NVML the fixture's GPU UUID is not there.

use crate::support::campaign::*;
use crate::support::shared;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// GPU 0 of the two-H200 fixture: 512 MiB used, no process, 74.83 W (idle and under load).
const GPU0: &str = "GPU-5c1b7f0e-1111-2222-3333-444455556666";
const H200: &str = "0, GPU-5c1b7f0e-1111-2222-3333-444455556666, NVIDIA H200, 143771, 512, 0, 74.83, 345, 2619, 570.133.20\n\
1, GPU-aaaaaaaa-1111-2222-3333-444455556666, NVIDIA H200, 143771, 80123, 97, 650.12, 1980, 2619, 570.133.20\n";
const WATTS: f64 = 74.83;

/// A directory holding a stand-in `nvidia-smi`: the fixture's answers, or a driver that is not
/// loaded (exit 9).
fn fake_smi(dir: &Path, works: bool) -> PathBuf {
    let d = dir.join(if works { "smi-ok" } else { "smi-dead" });
    std::fs::create_dir_all(&d).unwrap();
    let script = if works {
        format!("#!/bin/sh\ncase \"$1\" in\n  --query-gpu=*) printf '%s' '{H200}' ;;\n  --query-compute-apps=*) ;;\n  *) exit 2 ;;\nesac\n")
    } else {
        "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\nexit 9\n".into()
    };
    let p = d.join("nvidia-smi");
    std::fs::write(&p, script).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// Two reference arms, `fast` decoding twice as fast as the incumbent, on a lane owning GPU 0 at
/// 2.5 USD an hour, ranked by `ranking`.
fn write(t: &Camp, ranking: &str) -> PathBuf {
    write_with(t, ranking, "")
}

/// One capacity probe of 4 requests 125 ms apart: two or three readings in its window.
const CAPACITY: &str =
    "[workload.capacity]\nslo = [\"ttft_p95=2s\"]\nrates = [8.0]\nrequests = 4\n";

/// [`write`] with more `tables`.
fn write_with(t: &Camp, ranking: &str, tables: &str) -> PathBuf {
    t.profile(
        "inc",
        "ttft_ms = 5\ndecode_tok_s = 300\ncontext_tokens = 4096",
    );
    t.profile(
        "fast",
        "ttft_ms = 5\ndecode_tok_s = 600\ncontext_tokens = 4096",
    );
    let small = Small {
        ranking,
        max_tokens: 24,
        reps: 4,
        ignore_eos: true,
        tables,
        ..Small::default()
    };
    let mut s = t.head(
        "energy",
        &format!("gpus = [\"{GPU0}\"]\ncost_per_hour = 2.5\ncurrency = \"USD\""),
    );
    s.push_str(&small.toml());
    s.push_str(&reference_arm("inc", "incumbent", "inc", ""));
    s.push_str(&reference_arm("fast", "candidate", "fast", ""));
    let p = t.path("campaign.toml");
    std::fs::write(&p, s).unwrap();
    p
}

/// Runs the campaign with `smi` first on PATH; the bundle.
fn run_with(t: &Camp, file: &Path, smi: &Path) -> PathBuf {
    let inc = t.start_incumbent("inc");
    let path = format!(
        "{}:{}",
        smi.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new(BIN)
        .args(["run", file.to_str().unwrap(), "--no-progress"])
        .env("PATH", path)
        .env("BAKEOFF_LOCK_DIR", t.path("locks"))
        .output()
        .unwrap();
    let b = t.bundle();
    cleanup(&b, Some(inc), t.port);
    assert!(o.status.success(), "{}", text(&o));
    verify(&b);
    b
}

/// `arm-stats.csv` as (header, rows).
fn csv(b: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let doc = std::fs::read_to_string(b.join("arm-stats.csv")).unwrap();
    let mut lines = doc
        .lines()
        .map(|l| l.split(',').map(String::from).collect::<Vec<_>>());
    (lines.next().unwrap(), lines.collect())
}

fn col<'a>(h: &[String], row: &'a [String], name: &str) -> &'a str {
    &row[h
        .iter()
        .position(|x| x == name)
        .unwrap_or_else(|| panic!("no column {name}"))]
}

fn figures<'a>(s: &'a Value, arm: &str) -> &'a Value {
    s["energy_cost"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["arm"] == arm)
        .unwrap_or_else(|| panic!("no energy_cost row for {arm}: {s:#}"))
}

#[test]
fn energy_and_cost_per_million_tokens_land_in_every_document_and_rank() {
    let _g = shared();
    let t = Camp::new();
    let file = write_with(&t, r#""energy_per_mtok", "ttft""#, CAPACITY);
    let o = Command::new(BIN)
        .args(["run", "--dry-run"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        text(&o).contains("price      2.5 USD per hour"),
        "{}",
        text(&o)
    );
    let b = run_with(&t, &file, &fake_smi(t.dir.path(), true));

    // Every timed step's row: energy = 74.83 W over the window the throughput is measured over,
    // so J per million output tokens = 74.83 / output tok/s × 10⁶, cost = 2.5 / 3600 / tok/s × 10⁶.
    let (h, rows) = csv(&b);
    assert!(rows.len() >= 4, "{rows:?}");
    for row in &rows {
        let num = |c: &str| {
            col(&h, row, c)
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("{c}: {row:?}"))
        };
        let tok_s = num("output_tok_s");
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs();
        assert!(close(num("mean_power_w"), WATTS), "{row:?}");
        assert!(close(num("idle_power_w"), WATTS), "{row:?}");
        assert!(close(num("energy_j"), WATTS * num("window_s")), "{row:?}");
        assert!(
            close(num("energy_per_mtok_j"), WATTS / tok_s * 1e6),
            "{row:?}"
        );
        assert!(
            close(num("energy_per_request_j"), num("energy_j") / num("ok")),
            "{row:?}"
        );
        assert!(
            close(num("cost_per_mtok"), 2.5 / 3600.0 / tok_s * 1e6),
            "{row:?}"
        );
        assert_eq!(col(&h, row, "currency"), "USD");
    }

    // Ranked: the faster arm spends half the energy per token and wins on it.
    let s = json(&b.join("decision-summary.json"));
    assert_eq!(s["decision"]["winner_arm"], "fast", "{s:#}");
    let reason = s["decision"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("GPU energy per million output tokens"),
        "{reason}"
    );
    assert!(
        reason.contains("J/Mtok at warm (74.8 W mean over"),
        "{reason}"
    );
    assert!(
        reason.contains("idle baseline 74.8 W, not subtracted"),
        "{reason}"
    );
    let (f, i) = (figures(&s, "fast"), figures(&s, "inc"));
    let e = |v: &Value| v["energy_per_mtok_j"].as_f64().unwrap();
    assert!(e(f) < 0.7 * e(i), "{f} {i}");
    assert_eq!(f["step"], "warm");
    assert_eq!(f["currency"], "USD");
    assert!(f["cost_per_mtok"].as_f64().unwrap() > 0.0);
    let md = std::fs::read_to_string(b.join("publication-summary.md")).unwrap();
    assert!(md.contains("## Energy and cost"), "{md}");
    assert!(md.contains("| fast | warm | "), "{md}");
    let html = std::fs::read_to_string(b.join("report.html")).unwrap();
    assert!(html.contains("<h2 id=\"energy-cost\">Energy and cost</h2>"));
    // The result records the figures per step, the step file the readings they rest on.
    let r = json(&b.join("campaign-result.json"));
    let warm = &arm(&r, "fast")["warm"];
    assert_eq!(warm["energy"]["per_mtok_j"].as_f64(), Some(e(f)));
    let step = json(&b.join(warm["evidence"].as_str().unwrap()));
    assert_eq!(step["gpu"]["idle_power_w"][GPU0], WATTS);
    assert!(step["gpu"]["samples"].as_array().unwrap().len() >= 2);

    // A capacity probe carries its energy as a timed step does (74.83 W over its window)...
    for id in ["inc", "fast"] {
        let e = &arm(&r, id)["capacity"]["probes"][0]["energy"];
        let num = |k: &str| e[k].as_f64().unwrap_or_else(|| panic!("{id} {k}: {e:#}"));
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs();
        assert!(close(num("mean_power_w"), WATTS), "{e:#}");
        assert!(close(num("energy_j"), WATTS * num("window_s")), "{e:#}");
        assert_eq!(e["requests"], 4, "{e:#}");
        assert!(
            close(num("per_mtok_j"), num("energy_j") / 96.0 * 1e6),
            "{e:#}"
        );
    }
    // ...recomputed from the probe's readings when the bundle is read: an edited figure in
    // campaign-result.json (the manifest sealed again) is refused, naming the probe.
    edit_result(&b, |r| {
        let e = &mut r["arms"][1]["capacity"]["probes"][0]["energy"]["per_mtok_j"];
        *e = (e.as_f64().unwrap() / 2.0).into();
    });
    let o = Command::new(BIN).arg("report").arg(&b).output().unwrap();
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains("fast-capacity.json: arm fast capacity probes[0] (8 req/s) energy"),
        "{out}"
    );
}

/// Edits the bundle's campaign-result.json and seals the manifest again over it.
fn edit_result(b: &Path, f: impl FnOnce(&mut Value)) {
    let p = b.join("campaign-result.json");
    let mut r = json(&p);
    assert_eq!(r["arms"][1]["id"], "fast", "{r:#}");
    f(&mut r);
    std::fs::write(&p, serde_json::to_vec_pretty(&r).unwrap()).unwrap();
    bakeoff::evidence::manifest::write(b).unwrap();
}

#[test]
fn without_power_readings_energy_is_not_measured_and_does_not_rank() {
    let _g = shared();
    let t = Camp::new();
    let file = write(&t, r#""energy_per_mtok", "cost_per_mtok""#);
    let b = run_with(&t, &file, &fake_smi(t.dir.path(), false));
    let (h, rows) = csv(&b);
    for row in &rows {
        for c in [
            "energy_j",
            "mean_power_w",
            "idle_power_w",
            "energy_per_mtok_j",
        ] {
            assert_eq!(col(&h, row, c), "", "{c} must be empty, never 0: {row:?}");
        }
        assert!(!col(&h, row, "cost_per_mtok").is_empty(), "{row:?}");
    }
    let s = json(&b.join("decision-summary.json"));
    for a in ["inc", "fast"] {
        let f = figures(&s, a);
        assert!(f["energy_per_mtok_j"].is_null(), "{f}");
        let why = f["energy_not_measured"].as_str().unwrap();
        assert!(
            why.contains("couldn't communicate with the NVIDIA driver"),
            "{why}"
        );
    }
    // No arm measured the first priority: the price per token decided (the faster arm's).
    assert_eq!(s["decision"]["winner_arm"], "fast", "{s:#}");
    let reason = s["decision"]["reason"].as_str().unwrap();
    assert!(reason.contains("nobody (no arm was measured on the first priority, GPU energy per million output tokens)"), "{reason}");
    assert!(
        reason.contains("USD/Mtok at warm (2.5 USD/h at"),
        "{reason}"
    );
    let lim = s["limitations"].to_string();
    assert!(lim.contains("fast's GPU energy per million output tokens was not measured (no GPU power reading was taken"), "{lim}");
    let md = std::fs::read_to_string(b.join("publication-summary.md")).unwrap();
    assert!(
        md.contains(
            "| inc | warm | not measured | not measured | not measured | not measured | 2.5 USD |"
        ),
        "{md}"
    );
    assert!(md.contains("- inc: energy not measured: no GPU power reading was taken: not applicable: no GPU sampled"), "{md}");
}

#[test]
fn a_ranking_that_could_never_be_measured_is_refused_at_load() {
    let t = Camp::new();
    let base = write(&t, r#""ttft""#);
    // Profiles by absolute path: each variant loads from a directory of its own.
    let text = std::fs::read_to_string(&base).unwrap().replace(
        "profile = \"",
        &format!("profile = \"{}/", t.dir.path().display()),
    );
    let no_gpu = text.replace(&format!("gpus = [\"{GPU0}\"]\n"), "").replace(
        "ranking_priority = [\"ttft\"]",
        "ranking_priority = [\"energy_per_mtok\"]",
    );
    let msg = one_error(
        &no_gpu,
        ("ranking_priority", 0),
        "workload.ranking_priority",
    );
    assert!(msg.contains("[lane] names no GPU"), "{msg}");
    let no_price = text
        .replace("cost_per_hour = 2.5\ncurrency = \"USD\"\n", "")
        .replace(
            "ranking_priority = [\"ttft\"]",
            "ranking_priority = [\"cost_per_mtok\"]",
        );
    let msg = one_error(
        &no_price,
        ("ranking_priority", 0),
        "workload.ranking_priority",
    );
    assert!(msg.contains("[lane] has no cost_per_hour"), "{msg}");
    let bad = text.replace("cost_per_hour = 2.5", "cost_per_hour = -1");
    let msg = one_error(&bad, ("cost_per_hour", 0), "lane.cost_per_hour");
    assert!(msg.contains("-1 is not a price per hour"), "{msg}");
    let no_cur = text.replace("currency = \"USD\"\n", "");
    let msg = one_error(&no_cur, ("cost_per_hour", 0), "lane.cost_per_hour");
    assert!(msg.contains("add currency = \"USD\""), "{msg}");
    let only_cur = text.replace("cost_per_hour = 2.5\n", "");
    let msg = one_error(&only_cur, ("currency", 0), "lane.currency");
    assert!(msg.contains("a currency without a price"), "{msg}");
}
