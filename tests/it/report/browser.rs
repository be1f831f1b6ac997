//! report.html in headless Chromium: every chart renders with its axes titled and every arm's
//! name in its legend, no script or console error occurs, the page loads nothing, and a chart
//! that fails to render fails the check. The page's own script writes what it drew into
//! `#chart-status` (per chart: axis titles and tick labels, legend labels, whether the legend
//! fits, points placed, pixels painted) and sets the title to `ok` only when all rendered.
//! Needs Debian's `chromium` (`scripts/test.sh` installs it); without it these tests fail.

use crate::support::campaign::{cleanup, run, text, Camp};
use crate::support::decide_fixture as fixture;

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::process::Command;

const CHROMIUM: &str = "/usr/bin/chromium";

/// Every plot of the report, in page order.
const ALL_CHARTS: [&str; 8] = [
    "ttft-vs-decode",
    "ttft-cdf",
    "itl-cdf",
    "ttft-vs-concurrency",
    "itl-vs-concurrency",
    "throughput-vs-concurrency",
    "frontier",
    "timeline",
];

/// The plots of a campaign with a capacity step (`[workload.capacity]` limiting TTFT): the
/// rate curves come before the timeline.
fn capacity_charts() -> Vec<&'static str> {
    let (timeline, rest) = ALL_CHARTS.split_last().unwrap();
    [rest, &["rate-ttft", "rate-goodput", *timeline]].concat()
}
/// The timeline's index in [`capacity_charts`].
const TIMELINE: usize = 9;

pub(super) fn chromium(profile: &Path, args: &[&str], url: &str) -> std::process::Output {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install it with `apt-get install -y chromium` (the report tests need a headless browser)"
    );
    Command::new("timeout")
        .arg("120")
        .arg(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
        ])
        .args([
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .args([
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,1000",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .expect("chromium runs")
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// What a page showed: its title, `#chart-status` and Chromium's log.
pub(super) struct Shown {
    pub title: String,
    pub status: Value,
    pub log: String,
}

pub(super) fn load(page: &Path, scratch: &Path) -> Shown {
    let out = chromium(
        scratch,
        &["--dump-dom"],
        &format!("file://{}", page.display()),
    );
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    let title = dom
        .split("<title>")
        .nth(1)
        .and_then(|t| t.split("</title>").next())
        .unwrap_or_default()
        .to_string();
    let status = dom
        .split("<pre id=\"chart-status\" hidden=\"\">")
        .nth(1)
        .and_then(|t| t.split("</pre>").next())
        .unwrap_or_else(|| {
            panic!(
                "no #chart-status in the page:\n{}\n{log}",
                &dom[..dom.len().min(3000)]
            )
        });
    let status: Value = serde_json::from_str(&unescape(status))
        .unwrap_or_else(|e| panic!("#chart-status is not JSON ({e}): {status}"));
    Shown { title, status, log }
}

fn is_number(tick: &str) -> bool {
    tick.replace(',', "").parse::<f64>().is_ok()
}

/// The checks every rendered report passes: each expected chart drew, titled, with its axes
/// titled (units after a comma, or streams), readable ticks and a legend that fits and names
/// every measured arm.
fn check_rendered(s: &Shown, expected: &[&str], arms: &[String]) {
    check_page(s, expected);
    for c in s.status["charts"].as_array().unwrap() {
        check_chart(c, arms);
    }
}

/// The page-wide checks: it reported ok, with no script, console or loading error, drawing
/// exactly the expected charts in order (each one then checked by [`check_chart`]).
pub(super) fn check_page(s: &Shown, expected: &[&str]) {
    let st = &s.status;
    assert_eq!(
        s.title, "ok",
        "the page did not report ok: {st:#}\n{}",
        s.log
    );
    assert_eq!(st["ok"], true, "{st:#}");
    assert_eq!(st["errors"], serde_json::json!([]), "{st:#}");
    assert!(
        st["library"]
            .as_str()
            .unwrap()
            .starts_with("Chart.js 4.6.1"),
        "{st:#}"
    );
    assert_eq!(
        st["resources"],
        serde_json::json!([]),
        "the page loaded something: {st:#}"
    );
    let charts = st["charts"].as_array().unwrap();
    let ids: Vec<&str> = charts.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, expected, "{st:#}");
    let console_errors: Vec<&str> = s
        .log
        .lines()
        .filter(|l| l.contains("CONSOLE") && l.to_lowercase().contains("error"))
        .collect();
    assert!(console_errors.is_empty(), "{console_errors:?}");
}

/// One chart drew, titled, with its axes titled (units after a comma, or streams), readable
/// ticks, points on the plot and a legend that fits and names every one of `names` (exactly, or
/// followed by ` (`).
pub(super) fn check_chart(c: &Value, names: &[String]) {
    let id = c["id"].as_str().unwrap();
    assert_eq!(c["ok"], true, "{id}: {c:#}");
    assert!(c["title"].as_str().is_some_and(|t| !t.is_empty()), "{id}");
    assert_eq!(c["legend_fits"], true, "{id}: a legend entry is cut: {c:#}");
    assert!(c["painted_pixels"].as_u64().unwrap() > 2000, "{id}: {c:#}");
    assert!(c["points"].as_u64().unwrap() > 0, "{id}: {c:#}");
    assert_eq!(
        c["points"], c["placed"],
        "{id}: a point off the plot: {c:#}"
    );
    let axes = c["axes"].as_object().unwrap();
    assert!(axes.contains_key("x") && axes.contains_key("y"), "{id}");
    for (k, a) in axes {
        let title = a["title"].as_str().unwrap_or_default();
        assert!(
            title.contains(", ") || title.contains("(streams)") || title == "fraction of requests",
            "{id} axis {k}: title {title:?} names no unit"
        );
        let ticks: Vec<&str> = a["ticks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert!(ticks.len() >= 2, "{id} axis {k}: ticks {ticks:?}");
        for t in &ticks {
            assert!(is_number(t), "{id} axis {k}: tick {t:?}");
            // Nice numbers: no tick needs more than 2 decimals (no 111/223/334.5).
            let decimals = t.split('.').nth(1).map_or(0, str::len);
            assert!(decimals <= 2, "{id} axis {k}: tick {t:?}");
        }
        if title.contains("concurrency") {
            assert!(
                ticks.iter().all(|t| t.parse::<u64>().is_ok()),
                "{id}: concurrency ticks {ticks:?} are not whole streams"
            );
        }
    }
    let legend: Vec<&str> = c["legend"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    for a in names {
        assert!(
            legend
                .iter()
                .any(|l| l == a || l.starts_with(&format!("{a} ("))),
            "{id}: {a:?} is not in the legend {legend:?}"
        );
    }
}

/// The page loads nothing: no address in an attribute that loads, no CSS url().
pub(super) fn check_self_contained(html: &str) {
    for bad in [
        "src=\"http",
        "href=\"http",
        "url(http",
        "src='http",
        "<link ",
    ] {
        assert!(!html.contains(bad), "the page must load nothing ({bad})");
    }
}

#[test]
fn every_chart_of_the_seed_fixture_renders_in_headless_chromium() {
    // Chromium takes both cores for a moment: never beside a timing test.
    let _g = crate::support::shared();
    let d = tempfile::tempdir().unwrap();
    let bundle = d.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    let r = fixture::seed();
    fixture::write_bundle(&bundle, &r);
    bakeoff::report::render_all(&bundle).unwrap();
    let page = bundle.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    check_self_contained(&html);
    let shown = load(&page, &d.path().join("p1"));
    // The fixture's timing files and records hold TTFT and E2E, no ITL: the ITL charts are
    // named missing with their reasons, every other chart draws.
    assert!(html.contains("No per-arm ITL values were recorded."));
    assert!(html.contains("No ITL was recorded at any concurrency level."));
    let expected: Vec<&str> = ALL_CHARTS
        .iter()
        .copied()
        .filter(|c| !c.starts_with("itl-"))
        .collect();
    let measured: Vec<String> = r
        .arms
        .iter()
        .filter(|a| a.warm.is_some())
        .map(|a| {
            if a.label.is_empty() {
                a.id.clone()
            } else {
                a.label.clone()
            }
        })
        .collect();
    assert!(measured.len() >= 5, "{measured:?}");
    check_rendered(&shown, &expected, &measured);
    // The fixture's GPU memory per step (a summary, no readings) is drawn on the timeline's
    // right axis; it has no utilization or power, so no axis for them.
    let tl = &shown.status["charts"][expected.len() - 1];
    assert_eq!(tl["axes"]["y2"]["title"], "GPU memory used, MiB", "{tl:#}");
    assert!(tl["axes"].get("y3").is_none() && tl["axes"].get("y4").is_none());
    assert!(tl["legend"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l == "GPU memory used, MiB (right)"));
    assert!(html.contains("each timed step's summary"));

    // A screenshot far from blank.
    let shot = d.path().join("report.png");
    let out = chromium(
        &d.path().join("p2"),
        &[&format!("--screenshot={}", shot.display())],
        &format!("file://{}", page.display()),
    );
    let png = std::fs::read(&shot).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(png.len() > 50_000, "screenshot of {} bytes", png.len());
}

#[test]
fn a_chart_that_fails_to_render_fails_the_check() {
    // Chromium takes both cores for a moment: never beside a timing test.
    let _g = crate::support::shared();
    let d = tempfile::tempdir().unwrap();
    let bundle = d.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    fixture::write_bundle(&bundle, &fixture::seed());
    bakeoff::report::render_all(&bundle).unwrap();
    let html = std::fs::read_to_string(bundle.join("report.html")).unwrap();

    // One chart of an unknown type: Chart.js refuses it, the status names it, the title says so.
    let (at, _) = html.match_indices("{\"config\":").nth(1).unwrap();
    let broken = format!(
        "{}{}",
        &html[..at],
        html[at..].replacen("\"type\":\"scatter\"", "\"type\":\"no-such-chart\"", 1)
    );
    assert_ne!(broken, html);
    let page = d.path().join("broken.html");
    std::fs::write(&page, &broken).unwrap();
    let s = load(&page, &d.path().join("p1"));
    assert!(s.title.starts_with("error: "), "{}", s.title);
    assert_eq!(s.status["ok"], false);
    let failed: Vec<&Value> = s.status["charts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] != true)
        .collect();
    assert_eq!(failed.len(), 1, "{:#}", s.status);
    assert!(failed[0]["error"]
        .as_str()
        .unwrap()
        .contains("no-such-chart"));

    // Without the library no chart renders.
    let lib = bakeoff::report::charts::chart_js();
    let page = d.path().join("nolib.html");
    std::fs::write(&page, html.replacen(lib, "", 1)).unwrap();
    let s = load(&page, &d.path().join("p2"));
    assert!(s.title.contains("Chart.js did not load"), "{}", s.title);
    assert!(s.status["charts"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["ok"] == false));
}

#[test]
fn the_vendored_chart_library_is_the_pinned_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read(root.join("vendor/chart.js/chart.umd.min.js")).unwrap();
    let sum = format!("{:x}", Sha256::digest(&lib));
    let readme = std::fs::read_to_string(root.join("vendor/README.md")).unwrap();
    assert!(
        readme.contains(&format!("| `{sum}` |")),
        "vendor/chart.js/chart.umd.min.js has SHA-256 {sum}, not the one vendor/README.md pins"
    );
    assert!(readme.contains("| Chart.js | 4.6.1 |") && readme.contains("MIT"));
    assert!(root.join("vendor/chart.js/LICENSE.md").exists());
}

/// A campaign run against reference engines with three levels and a two-rate capacity step:
/// every chart renders from the bundle a real run wrote, with each arm's label (one of them
/// long) in every legend, the rate curves included.
#[test]
fn a_real_sweep_renders_every_chart() {
    // Chromium takes both cores for a moment: never beside a timing test.
    let _g = crate::support::shared();
    let t = Camp::new();
    t.profile(
        "inc",
        "ttft_ms = 20\nprefill_tok_s = 20000\ndecode_tok_s = 300\nconcurrency_slowdown = 0.1\ncontext_tokens = 4096",
    );
    t.profile(
        "fast",
        "ttft_ms = 8\nprefill_tok_s = 40000\ndecode_tok_s = 500\nconcurrency_slowdown = 0.05\ncontext_tokens = 4096",
    );
    let file = t.write(&[("inc", "inc"), ("fast", "fast")], "", "");
    let long = "a candidate whose label is long: NVFP4 weights, FP8 KV cache, MTP 3";
    let toml = std::fs::read_to_string(&file)
        .unwrap()
        .replace("concurrency = [1, 2]", "concurrency = [1, 2, 4]")
        .replace("warm_repetitions = 2", "warm_repetitions = 6")
        .replace(
            "id = \"fast\"\n",
            &format!("id = \"fast\"\nlabel = \"{long}\"\n"),
        );
    // A table after the arms is still `[workload]`'s: two short probes per arm.
    let toml = toml + "\n[workload.capacity]\nslo = [\"ttft_p95=200ms\"]\nrates = [20.0, 40.0]\nrequests = 4\narrival = \"constant\"\n";
    std::fs::write(&file, toml).unwrap();
    let o = run(&[file.to_str().unwrap()]);
    let b = t.bundle();
    cleanup(&b, None, t.port);
    assert!(o.status.success(), "{}", text(&o));
    let page = b.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    check_self_contained(&html);
    let s = load(&page, &t.path("chromium"));
    check_rendered(
        &s,
        &capacity_charts(),
        &["inc".to_string(), long.to_string()],
    );
    let charts = s.status["charts"].as_array().unwrap();
    assert_eq!(
        charts[3]["axes"]["x"]["ticks"],
        serde_json::json!(["1", "2", "4"]),
        "{:#}",
        charts[3]
    );
    // The timeline covers the whole run: every timed request of both arms (cold 1 + warm 6 +
    // 2 × 6 + 4 × 6 each), no GPU line on a lane without one.
    assert_eq!(
        charts[TIMELINE]["points"],
        2 * (1 + 6 + 12 + 24),
        "{:#}",
        charts[TIMELINE]
    );
    assert!(charts[TIMELINE]["axes"].get("y2").is_none());
    // The rate curves: per arm each probe's judged TTFT p95 and its median, and the SLO line;
    // goodput per probe and the offered-rate line.
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(b.join("campaign-result.json")).unwrap()).unwrap();
    let probes: u64 = result["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            a["capacity"]["probes"]
                .as_array()
                .map_or(0, |p| p.len() as u64)
        })
        .sum();
    // Each arm probes 20 req/s, and 40 unless 20 already broke (a loaded machine may).
    assert!((2..=4).contains(&probes), "{probes} probes");
    assert_eq!(charts[7]["points"], 2 * probes + 2, "{:#}", charts[7]);
    assert_eq!(charts[8]["points"], probes + 2, "{:#}", charts[8]);
    assert!(
        html.contains("SLO ttft p95 \\u003c= 200 ms") || html.contains("SLO ttft p95 <= 200 ms")
    );

    // GPU readings on the timeline. No GPU here, so the bundle the run wrote gets them added
    // (a fixture): every timed step's evidence gains the `gpu` record `load::session` writes on
    // a lane with GPUs, built from `telemetry::sampler`'s own types (`GpuSample` readings every
    // 200 ms of two GPUs over the step's load, `summarize` for `per_gpu`), then the bundle is
    // re-sealed and re-rendered.
    let gb = t.path("gpu-bundle");
    copy_dir(&b, &gb);
    let readings = add_gpu_samples(&gb);
    assert!(readings > 20, "{readings} readings");
    bakeoff::evidence::manifest::write(&gb).unwrap();
    bakeoff::report::render_all(&gb).unwrap();
    let page = gb.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("every reading the sampler took during each timed step"));
    let s = load(&page, &t.path("chromium-gpu"));
    check_rendered(
        &s,
        &capacity_charts(),
        &["inc".to_string(), long.to_string()],
    );
    let tl = &s.status["charts"][TIMELINE];
    for (axis, title, key) in [
        ("y2", "GPU memory used, MiB", "GPU memory used, MiB (right)"),
        ("y3", "GPU utilization, %", "GPU utilization, % (right)"),
        ("y4", "GPU power, W", "GPU power, W (right)"),
    ] {
        assert_eq!(tl["axes"][axis]["title"], title, "{tl:#}");
        assert!(
            tl["legend"].as_array().unwrap().iter().any(|l| l == key),
            "{key}: {tl:#}"
        );
    }
    // Every TTFT point and, per arm and quantity, every sampling round plus one gap per step.
    let rounds = readings / 2;
    let steps = 2 * (1 + 1 + 2);
    assert_eq!(
        tl["points"],
        2 * (1 + 6 + 12 + 24) + 3 * (rounds + steps),
        "{tl:#}"
    );
    // The readings are memory, not wallpaper: the GPU axes' ticks reach the values written.
    let top = |axis: &str| -> f64 {
        tl["axes"][axis]["ticks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t.as_str()?.replace(',', "").parse::<f64>().ok())
            .fold(0.0, f64::max)
    };
    assert!(top("y2") >= 2.0 * 40_000.0, "{tl:#}");
    assert_eq!(top("y3"), 100.0, "{tl:#}");
    assert!(top("y4") >= 2.0 * 600.0, "{tl:#}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// Adds a lane-with-GPUs `gpu` record to every timed step's evidence file of a bundle (see the
/// test); returns how many readings were written.
fn add_gpu_samples(bundle: &Path) -> u64 {
    use bakeoff::telemetry::sampler::{summarize, GpuSample};
    let result: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("campaign-result.json")).unwrap())
            .unwrap();
    let mut files: Vec<String> = Vec::new();
    for a in result["arms"].as_array().unwrap() {
        for t in [&a["cold"], &a["warm"]] {
            files.extend(t["evidence"].as_str().map(str::to_string));
        }
        for t in a["concurrency"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.values())
        {
            files.extend(t["evidence"].as_str().map(str::to_string));
        }
    }
    assert_eq!(files.len(), 8, "{files:?}");
    let mut n = 0;
    for (i, name) in files.iter().enumerate() {
        let p = bundle.join(name);
        let mut f: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        let end_ms = f["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r["send_offset_ms"].as_f64().unwrap_or(0.0)
                    + r["metrics"]["e2e_ms"].as_f64().unwrap_or(0.0)
            })
            .fold(0.0, f64::max);
        // The sampler's clock: CLOCK_MONOTONIC ns, a distinct start per step.
        let start_ns = 1_000_000_000_000 + i as u64 * 100_000_000_000;
        let mut samples = Vec::new();
        let mut t_ms = 0.0;
        while t_ms <= end_ms + 200.0 {
            for (g, uuid) in ["GPU-4f6b1e2a-0000", "GPU-4f6b1e2a-0001"]
                .iter()
                .enumerate()
            {
                let load = (t_ms / end_ms.max(1.0)).min(1.0);
                samples.push(GpuSample {
                    t_ms,
                    mono_ns: start_ns + (t_ms * 1e6) as u64,
                    uuid: uuid.to_string(),
                    memory_used_mib: 40_000 + (load * 2_000.0) as u64 + g as u64 * 100,
                    utilization_pct: Some(60.0 + 40.0 * load),
                    power_w: Some(350.0 + 300.0 * load),
                    sm_clock_mhz: Some(1980),
                });
            }
            t_ms += 200.0;
        }
        n += samples.len() as u64;
        let end_ns = start_ns + (end_ms * 1e6) as u64;
        f["gpu"] = serde_json::json!({
            "source": "nvml", "note": null, "interval_ms": 200,
            "per_gpu": summarize(&samples, start_ns, end_ns),
            "samples": samples,
        });
        std::fs::write(&p, serde_json::to_vec_pretty(&f).unwrap()).unwrap();
    }
    // The result's energy records follow their step files (`verify` recomputes them): these
    // readings lie on another clock than the steps' windows, so each says "not measured".
    let mut result = result;
    for a in result["arms"].as_array_mut().unwrap() {
        let mut records: Vec<&mut Value> = vec![];
        let a = a.as_object_mut().unwrap();
        for (k, t) in a.iter_mut() {
            match k.as_str() {
                "cold" | "warm" if t.is_object() => records.push(t),
                "concurrency" => records.extend(t.as_object_mut().unwrap().values_mut()),
                _ => {}
            }
        }
        for t in records {
            let file = bundle.join(t["evidence"].as_str().unwrap());
            let f: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
            t["energy"] =
                serde_json::to_value(bakeoff::evidence::energy::from_step_file(&f)).unwrap();
        }
    }
    std::fs::write(
        bundle.join("campaign-result.json"),
        serde_json::to_vec_pretty(&result).unwrap(),
    )
    .unwrap();
    n
}
