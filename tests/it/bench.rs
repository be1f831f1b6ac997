//! `bakeoff bench` against the reference engine, whose declared timing is the ground truth.

use crate::support::reference;
use reference::{bench, metric, text, Engine};

const BASE: &str =
    "model = \"ref\"\nttft_ms = 50\nprefill_tok_s = 0\ndecode_tok_s = 80\ncontext_tokens = 8192\n";

fn run(profile_extra: &str, args: &[&str]) -> serde_json::Value {
    let _g = reference::serial();
    let e = Engine::start(&format!("{BASE}{profile_extra}"));
    let out = e.path("bench.json");
    let (o, v) = bench(&e.url, args, &out);
    assert!(o.status.success(), "{}", text(&o));
    v.expect("summary written")
}

const SMALL: &[&str] = &[
    "--requests",
    "8",
    "--max-tokens",
    "40",
    "--prompt-tokens",
    "64",
    "--ignore-eos",
];

#[test]
fn ttft_and_decode_match_the_declared_profile() {
    let v = run("", SMALL);
    let ttft = metric(&v, "ttft_ms", "p50");
    let decode = metric(&v, "decode_tok_s", "p50");
    assert!(
        (ttft - 50.0).abs() <= 1.0,
        "TTFT p50 {ttft} ms, declared 50"
    );
    assert!(
        (decode - 80.0).abs() <= 0.8,
        "decode p50 {decode} tok/s, declared 80"
    );
    assert_eq!(v["ok"], 8);
    assert_eq!(v["failed"], 0);
    // The matched prompt is exact on the engine's own tokenizer.
    assert_eq!(metric(&v, "prompt_tokens", "min"), 64.0);
    assert_eq!(metric(&v, "prompt_tokens", "max"), 64.0);
    assert_eq!(metric(&v, "completion_tokens", "p50"), 40.0);
    assert_eq!(v["prompt_token_mismatches"], 0);
    assert!(v["definitions"]["ttft_ms"]
        .as_str()
        .unwrap()
        .contains("visible content"));
    assert_eq!(v["bakeoff_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["sampling"]["temperature"], 0.0);
    assert_eq!(v["sampling"]["ignore_eos"], true);
    // Arrival times are the kernel's receive stamps (the read time only where there is none).
    let stamped = v["arrival_clock"]["kernel_stamped_reads"].as_u64().unwrap();
    let unstamped = v["arrival_clock"]["read_time_reads"].as_u64().unwrap();
    assert!(
        stamped > 8 * 40 / 2 && stamped > 10 * unstamped,
        "{}",
        v["arrival_clock"]
    );
}

#[test]
fn early_role_chunk_does_not_move_ttft() {
    let v = run("early_role_chunk = true\n", SMALL);
    let ttft = metric(&v, "ttft_ms", "p50");
    let ttfb = metric(&v, "ttfb_ms", "p50");
    assert!((ttft - 50.0).abs() <= 1.0, "TTFT p50 {ttft}");
    assert!(
        ttfb < 10.0,
        "TTFB {ttfb} should be the early head, not the first token"
    );
}

#[test]
fn reasoning_moves_ttfo_but_not_ttft() {
    // 4 reasoning tokens at 80 tok/s = 50 ms before the first visible token.
    let v = run("reasoning_tokens = 4\n", SMALL);
    let ttft = metric(&v, "ttft_ms", "p50");
    let ttfo = metric(&v, "ttfo_ms", "p50");
    assert!((ttft - 50.0).abs() <= 1.0, "TTFT p50 {ttft}");
    assert!(
        ttfo < ttft - 30.0,
        "TTFO {ttfo} should precede TTFT {ttft} by the reasoning"
    );
    assert_eq!(metric(&v, "reasoning_tokens", "p50"), 4.0);
}

#[test]
fn several_tokens_per_chunk_widen_chunk_gaps_not_itl() {
    let v = run("tokens_per_chunk = 3\n", SMALL);
    let itl = metric(&v, "itl_ms", "p50");
    let gap = metric(&v, "chunk_gap_ms", "p50");
    assert!((itl - 12.5).abs() < 0.2, "ITL {itl}");
    let ratio = gap / itl;
    assert!((ratio - 3.0).abs() < 0.1, "gap {gap} / ITL {itl} = {ratio}");
}

#[test]
fn http_500s_are_classified_and_the_run_completes() {
    // A literal prompt: no sizing requests, so the declared fault hits measured requests only.
    let v = run(
        "error_rate = 0.5\n",
        &["--requests", "20", "--max-tokens", "4", "--prompt", "hello"],
    );
    let failed = v["failed"].as_u64().unwrap();
    assert!(failed > 0 && failed < 20, "failed {failed}");
    assert_eq!(v["ok"].as_u64().unwrap() + failed, 20);
    let f = &v["failures_by_class"]["http-status"];
    assert_eq!(f["count"].as_u64().unwrap(), failed);
    assert!(f["example"].as_str().unwrap().contains("HTTP 500"), "{f}");
    // Failed requests never enter percentiles.
    assert_eq!(v["metrics"]["ttft_ms"]["n"].as_u64().unwrap(), 20 - failed);
}

#[test]
fn a_stall_is_classified() {
    let e = Engine::start(&format!("{BASE}stall_after_chunks = 3\n"));
    let out = e.path("b.json");
    let (o, v) = bench(
        &e.url,
        &[
            "--requests",
            "2",
            "--max-tokens",
            "20",
            "--prompt-tokens",
            "32",
            "--stall-timeout",
            "0.5",
        ],
        &out,
    );
    // Every request failed, so the command fails, but the summary is still written.
    assert!(!o.status.success());
    assert!(text(&o).contains("no request succeeded"), "{}", text(&o));
    let v = v.expect("summary written even when every request failed");
    assert_eq!(v["failures_by_class"]["stall"]["count"], 2);
}

#[test]
fn a_crash_mid_run_is_classified_and_reported() {
    let e = Engine::start(&format!("{BASE}crash_after_requests = 3\n"));
    let out = e.path("b.json");
    let (o, v) = bench(
        &e.url,
        &["--requests", "6", "--max-tokens", "20", "--prompt", "hello"],
        &out,
    );
    let v = v.unwrap_or_else(|| panic!("summary written: {}", text(&o)));
    assert_eq!(v["ok"], 2, "{v}");
    assert_eq!(v["failed"], 4);
    let classes = v["failures_by_class"].as_object().unwrap();
    // The cut stream is incomplete; the later requests can't connect.
    assert!(
        classes.contains_key("incomplete") || classes.contains_key("io"),
        "{classes:?}"
    );
    assert!(classes.contains_key("connect"), "{classes:?}");
}

#[test]
fn open_loop_records_schedule_lag() {
    let v = run(
        "",
        &[
            "--rate",
            "20",
            "--arrival",
            "poisson",
            "--requests",
            "10",
            "--max-tokens",
            "4",
            "--prompt-tokens",
            "32",
        ],
    );
    assert_eq!(v["ok"], 10);
    assert_eq!(v["load"]["mode"], "open-loop");
    let lag = metric(&v, "schedule_lag_ms", "p99");
    assert!(lag < 50.0, "lag {lag}");
}

#[test]
fn warmup_is_excluded_and_jsonl_has_raw_offsets() {
    let e = Engine::start(BASE);
    let out = e.path("b.json");
    let jl = e.path("r.jsonl");
    let (o, v) = bench(
        &e.url,
        &[
            "--requests",
            "3",
            "--warmup",
            "2",
            "--max-tokens",
            "5",
            "--prompt-tokens",
            "32",
            "--requests-jsonl",
            jl.to_str().unwrap(),
        ],
        &out,
    );
    assert!(o.status.success(), "{}", text(&o));
    let v = v.unwrap();
    assert_eq!(v["warmup_excluded"], 2);
    assert_eq!(v["metrics"]["ttft_ms"]["n"], 3);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&jl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines.iter().filter(|l| l["warmup"] == true).count(), 2);
    for l in &lines {
        let offs = l["chunk_offsets_ns"].as_array().unwrap();
        // role/content chunks, finish, usage, [DONE]
        assert!(offs.len() >= 5 + 2, "{l}");
        assert_eq!(l["usage"]["completion_tokens"], 5);
        assert_eq!(l["metrics"]["output_chunks"], 5);
        assert_eq!(l["client_prompt_tokens"], 32);
    }
}

#[test]
fn bad_input_gets_one_clear_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "localhost:1"], "http://"),
        (&["bench", "http://127.0.0.1:1"], "cannot connect"),
        (
            &["bench", "http://127.0.0.1:9", "--concurrency", "0"],
            "--concurrency",
        ),
        (
            &["bench", "http://127.0.0.1:9", "--extra-body", "{oops"],
            "--extra-body",
        ),
        (
            &[
                "bench",
                "http://127.0.0.1:9",
                "--api-key-env",
                "BAKEOFF_SURELY_UNSET_VAR",
            ],
            "BAKEOFF_SURELY_UNSET_VAR",
        ),
        (
            &["engine", "--profile", "/nonexistent/p.toml"],
            "/nonexistent/p.toml",
        ),
    ];
    for (args, needle) in cases {
        let o = std::process::Command::new(reference::BIN)
            .args(*args)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(needle),
            "{args:?}: stderr {err:?} lacks {needle:?}"
        );
        assert!(
            err.trim().lines().count() <= 2,
            "{args:?}: not one clear line: {err}"
        );
    }
}

#[test]
fn a_server_that_is_not_openai_compatible() {
    // A plain HTTP server with no /v1/models.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for s in l.incoming().take(4) {
            let mut s = s.unwrap();
            let mut b = [0u8; 4096];
            let _ = s.read(&mut b);
            let _ = s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot here!");
        }
    });
    let o = std::process::Command::new(reference::BIN)
        .args(["bench", &format!("http://127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("OpenAI-compatible"), "{err}");
}

#[test]
fn ctrl_c_writes_the_summary_of_what_completed() {
    let e = Engine::start(BASE);
    let out = e.path("int.json");
    let child = std::process::Command::new(reference::BIN)
        .args([
            "bench",
            &e.url,
            "--prompt",
            "hi",
            "--requests",
            "200",
            "--concurrency",
            "2",
            "--max-tokens",
            "40",
            "--no-progress",
            "--json",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // 40 tokens at 80 tok/s: about two requests per stream per second.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success());
    assert!(text(&o).contains("interrupted"), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["interrupted"], true);
    let ok = v["ok"].as_u64().unwrap();
    assert!((2..200).contains(&ok), "ok {ok}");
    // Dropped in-flight requests are not failures.
    assert_eq!(v["failed"], 0);
}

#[test]
fn bench_and_campaign_timing_run_one_load_path_and_agree() {
    use bakeoff::cli::bench::{bench, ArrivalArg, BenchArgs, EndpointArg};
    use bakeoff::client::Target;
    use bakeoff::load::session;
    use bakeoff::run::timed::{self as timing, TimingInput};
    use bakeoff::workload::prompt::{self, PromptSpec};
    use bakeoff::workload::request::BodySpec;
    use bakeoff::workload::Endpoint;
    use std::sync::Arc;
    use std::time::Duration;

    let _g = reference::serial();
    // BASE: a fixed 50 ms TTFT, free prefill, 80 tok/s, no concurrency slowdown, no faults, so
    // both loads face the same declared timing.
    let e = Engine::start(BASE);
    // The same load both ways: a 64-token matched chat prompt, 40 tokens with ignore_eos,
    // closed loop at concurrency 2, 8 measured requests, no warm-up, the same limits.
    let (concurrency, requests, max_tokens, prompt_tokens) = (2u32, 8u32, 40u64, 64u64);
    let args = BenchArgs {
        url: e.url.clone(),
        ca_file: None,
        insecure: false,
        model: None,
        endpoint: EndpointArg::Chat,
        prompt_tokens,
        prompt: None,
        tokenizer: None,
        allow_prefix_cache: false,
        max_tokens,
        temperature: 0.0,
        seed: Some(0),
        ignore_eos: true,
        concurrency: vec![concurrency as usize],
        rate: vec![],
        arrival: ArrivalArg::Constant,
        requests: Some(requests as u64),
        duration: None,
        warmup: 0,
        api_key_env: None,
        extra_body: None,
        timeout: 600.0,
        stall_timeout: 120.0,
        json: None,
        requests_jsonl: None,
        csv: None,
        export_vllm: None,
        html: None,
        no_progress: true,
        source: Default::default(),
        shape: Default::default(),
        conv: Default::default(),
    };
    let rt = bakeoff::load::pace::client_runtime().unwrap();
    let n0 = session::sessions();
    let (b, t, base) = rt.block_on(async {
        let (_keep, never) = tokio::sync::watch::channel(false);
        let b = bench(args, never).await.unwrap();
        assert_eq!(
            session::sessions(),
            n0 + 1,
            "bench ran its load through load::session"
        );
        let target = Target::parse(&e.url).unwrap();
        let m = prompt::build(&PromptSpec {
            target: &target,
            model: "ref",
            endpoint: Endpoint::Chat,
            tokens: prompt_tokens,
            tokenizer: None,
            api_key: None,
            nonce: true,
            timeout: Duration::from_secs(300),
            extra_body: None,
        })
        .await
        .unwrap();
        // What the campaign's `request_base` builds for this workload.
        let base = BodySpec {
            model: "ref",
            max_tokens,
            temperature: Some(0.0),
            top_p: None,
            seed: Some(0),
            ignore_eos: true,
            stream: Some(true),
        }
        .build();
        let t = timing::run(TimingInput {
            target,
            base: base.clone(),
            prompt: Arc::new(m),
            api_key: None,
            concurrency,
            requests,
            first_index: 1000,
            nonce_base: 0,
            seed: 0,
            gpus: vec![],
        })
        .await
        .unwrap();
        assert_eq!(
            session::sessions(),
            n0 + 2,
            "timing ran its load through load::session"
        );
        (b, t, base)
    });
    // The same request body (minus the prompt) both ways.
    assert_eq!(b.sampling, serde_json::Value::Object(base));
    assert_eq!(t.evidence["sampling"], b.sampling);
    let (bs, ts) = (&b.stats, &t.stats);
    // Counts are exact: the same requests, each generating exactly max_tokens on an exact prompt.
    for s in [bs, ts] {
        assert_eq!((s.ok, s.failed, s.warmup_excluded), (requests as u64, 0, 0));
        assert_eq!(s.completion_tokens_total, requests as u64 * max_tokens);
        assert_eq!(s.prompt_token_mismatches, 0);
        for (name, want) in [
            ("prompt_tokens", prompt_tokens),
            ("completion_tokens", max_tokens),
        ] {
            let d = &s.metrics[name];
            assert_eq!((d.min, d.max), (want as f64, want as f64), "{name}");
        }
    }
    assert_eq!(t.evidence["requests"].as_array().unwrap().len(), 8);
    assert!(
        t.evidence["engine_metrics"]["diff"].is_object(),
        "{}",
        t.evidence["engine_metrics"]
    );
    // Times agree within the engine's own jitter: at 160 events/s its timer spins to each
    // deadline (~5 µs, docs/reference-engine.md "Precision") and the client adds tens of µs
    // (`bakeoff selftest`), so medians of the same path differ by scheduling noise of this
    // shared host only. The bounds are those `ttft_and_decode_match_the_declared_profile`
    // allows around the declared profile: 1 ms of TTFT, 1% of decode rate.
    let p50 = |s: &bakeoff::metrics::summary::RunStats, m: &str| s.metrics[m].p50;
    let (bt, tt) = (p50(bs, "ttft_ms"), p50(ts, "ttft_ms"));
    assert!(
        (bt - tt).abs() <= 1.0,
        "TTFT p50: bench {bt} ms, timing {tt} ms"
    );
    assert!(
        (tt - 50.0).abs() <= 1.0,
        "timing TTFT p50 {tt} ms, declared 50"
    );
    let (bd, td) = (p50(bs, "decode_tok_s"), p50(ts, "decode_tok_s"));
    assert!(
        (bd - td).abs() <= 0.8,
        "decode p50: bench {bd}, timing {td} tok/s"
    );
    assert!(
        (td - 80.0).abs() <= 0.8,
        "timing decode p50 {td} tok/s, declared 80"
    );
}

#[test]
fn two_runs_in_a_row_both_measure_the_uncached_prefill() {
    let _g = reference::serial();
    // 256 prompt tokens at 2,000 tok/s of prefill: 178 ms uncached, about 58 ms from the cache.
    let e = Engine::start(
        "model = \"ref\"\nttft_ms = 50\nprefill_tok_s = 2000\ndecode_tok_s = 200\ncontext_tokens = 8192\nprefix_cache = true\n",
    );
    let args = &[
        "--requests",
        "4",
        "--max-tokens",
        "8",
        "--prompt-tokens",
        "256",
        "--ignore-eos",
    ];
    let run = |name: &str, extra: &[&str]| {
        let all: Vec<&str> = args.iter().chain(extra).copied().collect();
        let (o, v) = bench(&e.url, &all, &e.path(name));
        assert!(o.status.success(), "{}", text(&o));
        (text(&o), v.expect("summary written"))
    };
    let (_, a) = run("a.json", &[]);
    let (_, b) = run("b.json", &[]);
    for v in [&a, &b] {
        let ttft = metric(v, "ttft_ms", "p50");
        assert!(
            (ttft - 178.0).abs() <= 4.0,
            "TTFT p50 {ttft} ms, uncached 178"
        );
        assert!(metric(v, "ttft_ms", "min") > 170.0, "{}", v["metrics"]);
        assert_eq!(v["prefix_cache"]["requests_reporting"], 4);
        assert_eq!(v["prefix_cache"]["requests_served_from_cache"], 0);
        assert!(
            !v["warnings"].to_string().contains("prefix cache"),
            "{}",
            v["warnings"]
        );
        assert_eq!(v["load"]["nonce_base_from"], "random");
    }
    assert_ne!(a["load"]["nonce_base"], b["load"]["nonce_base"]);

    // The same --seed twice repeats the prompts: the second run is served from the cache, and
    // says so in its summary and its JSON.
    let (_, c) = run("c.json", &["--seed", "7"]);
    let (out, d) = run("d.json", &["--seed", "7"]);
    assert_eq!(c["load"]["nonce_base"], d["load"]["nonce_base"]);
    assert_eq!(d["load"]["nonce_base_from"], "--seed");
    assert_eq!(c["prefix_cache"]["requests_served_from_cache"], 0);
    assert_eq!(d["prefix_cache"]["requests_served_from_cache"], 4);
    assert!(metric(&d, "ttft_ms", "p50") < 100.0, "{}", d["metrics"]);
    let w = d["warnings"][0].as_str().expect("a warning");
    assert!(
        w.contains("4 of 4 requests were served from the server's prefix cache")
            && w.contains("--seed 7"),
        "{w}"
    );
    assert!(out.contains("warning: 4 of 4 requests"), "{out}");
}

/// A proxy in front of `upstream` that answers the first `fail` non-streaming completion requests
/// (prompt sizing's) with HTTP 500 and passes everything else through.
fn flaky_proxy(upstream: &str, fail: usize) -> String {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let up = upstream.trim_start_matches("http://").to_string();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let failed = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut client) = s else { return };
            let (up, failed) = (up.clone(), failed.clone());
            std::thread::spawn(move || {
                // The first request's head and body.
                let mut buf = Vec::new();
                let mut b = [0u8; 65536];
                loop {
                    let n = client.read(&mut b).unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&b[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text[..end]
                            .lines()
                            .find_map(|l| {
                                let l = l.to_ascii_lowercase();
                                l.strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap())
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let text = String::from_utf8_lossy(&buf);
                if text.starts_with("POST /v1/chat/completions")
                    && text.contains("\"stream\":false")
                    && failed.fetch_add(1, Ordering::SeqCst) < fail
                {
                    let body = "{\"error\":{\"message\":\"transient\"}}";
                    let _ = write!(client, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
                    return;
                }
                let mut server = TcpStream::connect(&up).unwrap();
                server.write_all(&buf).unwrap();
                let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c2, &mut s2);
                    let _ = s2.shutdown(std::net::Shutdown::Write);
                });
                let _ = std::io::copy(&mut server, &mut client);
                let _ = client.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    format!("http://127.0.0.1:{port}")
}

#[test]
fn prompt_sizing_retries_a_transient_http_500() {
    let _g = reference::serial();
    let e = Engine::start(BASE);
    let url = flaky_proxy(&e.url, 2);
    let out = e.path("retry.json");
    let (o, v) = bench(
        &url,
        &[
            "--requests",
            "2",
            "--max-tokens",
            "4",
            "--prompt-tokens",
            "64",
        ],
        &out,
    );
    assert!(o.status.success(), "{}", text(&o));
    let v = v.unwrap();
    assert_eq!(metric(&v, "prompt_tokens", "min"), 64.0);
    let notes = v["prompt"]["notes"].to_string();
    assert!(
        notes.contains("2 sizing request(s) were retried") && notes.contains("HTTP 500"),
        "{notes}"
    );

    // A server that keeps failing: the error names the status and the retries.
    let url = flaky_proxy(&e.url, usize::MAX);
    let (o, _) = bench(
        &url,
        &["--requests", "2", "--prompt-tokens", "64"],
        &e.path("x.json"),
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("HTTP 500") && err.contains("after 3 retries"),
        "{err}"
    );
}

/// A server whose /v1/models is a 404 HTML page and whose chat endpoint streams "hi".
fn server_without_models() -> String {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut b = [0u8; 65536];
            let n = s.read(&mut b).unwrap_or(0);
            let req = String::from_utf8_lossy(&b[..n]);
            if req.starts_with("GET /v1/models") {
                let html = "<!DOCTYPE html>\n<html>\n<head>\n<title>404 Not Found</title>\n</head>\n<body>\n<h1>Not Found</h1>\n<p>The requested URL was not found on this server.</p>\n<hr>\n</body>\n</html>\n";
                let _ = write!(s, "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}", html.len());
            } else {
                let chunk = r#"{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}"#;
                let last = r#"{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}"#;
                let body = format!("data: {chunk}\n\ndata: {last}\n\ndata: [DONE]\n\n");
                let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
            }
        }
    });
    format!("http://127.0.0.1:{port}")
}

#[test]
fn a_404_on_models_is_not_fatal_when_model_is_given() {
    let url = server_without_models();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let args = [
        "--model",
        "m",
        "--prompt",
        "hello",
        "--requests",
        "2",
        "--max-tokens",
        "1",
    ];
    let (o, v) = bench(&url, &args, &out);
    assert!(o.status.success(), "{}", text(&o));
    let v = v.unwrap();
    assert_eq!(v["ok"], 2);
    assert_eq!(v["model"], "m");
    let err = String::from_utf8_lossy(&o.stderr);
    let note: Vec<&str> = err.lines().filter(|l| l.contains("404")).collect();
    assert_eq!(note.len(), 1, "{err}");
    assert!(
        note[0].contains("Not Found") && !note[0].contains('<'),
        "{err}"
    );
    // Without --model it stays an error, on one line, without the HTML.
    let o = std::process::Command::new(reference::BIN)
        .args(["bench", &url, "--no-progress"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("HTTP 404") && err.trim().lines().count() <= 2 && !err.contains("<html"),
        "{err}"
    );
}

#[test]
fn a_concurrency_sweep_gives_one_result_per_level() {
    let _g = reference::serial();
    let e = Engine::start(BASE);
    let out = e.path("sweep.json");
    let jsonl = e.path("sweep.jsonl");
    let (o, v) = bench(
        &e.url,
        &[
            "--concurrency",
            "1,2,4",
            "--requests",
            "8",
            "--max-tokens",
            "8",
            "--prompt-tokens",
            "64",
            "--ignore-eos",
            "--requests-jsonl",
            jsonl.to_str().unwrap(),
        ],
        &out,
    );
    assert!(o.status.success(), "{}", text(&o));
    let v = v.unwrap();
    assert_eq!(v["sweep"], "concurrency");
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 3);
    for (l, c) in levels.iter().zip([1, 2, 4]) {
        assert_eq!(l["load"]["concurrency"], c, "{}", l["load"]);
        assert_eq!(l["ok"], 8);
        assert_eq!(metric(l, "prompt_tokens", "min"), 64.0);
        assert_eq!(metric(l, "prompt_tokens", "std"), 0.0);
        // Mean, standard deviation and total (input + output) throughput beside the percentiles.
        let ttft = &l["metrics"]["ttft_ms"];
        assert!(ttft["std"].as_f64().unwrap() >= 0.0 && ttft["mean"].as_f64().unwrap() > 0.0);
        assert_eq!(l["prompt_tokens_total"], 8 * 64);
        let total = l["aggregate_total_tok_s"].as_f64().unwrap();
        let output = l["aggregate_output_tok_s"].as_f64().unwrap();
        assert!(
            (total / output - (64.0 + 8.0) / 8.0).abs() < 1e-6,
            "{total} vs {output}"
        );
    }
    // More requests in flight, more output per second (80 tok/s each, no slowdown declared).
    let out_tok = |i: usize| levels[i]["aggregate_output_tok_s"].as_f64().unwrap();
    assert!(
        out_tok(2) > 2.0 * out_tok(0),
        "{} vs {}",
        out_tok(2),
        out_tok(0)
    );
    // Every level's requests are in the JSONL, marked with their level; nonces never repeat.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 24);
    assert_eq!(lines.iter().filter(|l| l["concurrency"] == 4).count(), 8);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("total (input + output)") && stdout.contains(" std "),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("closed loop at concurrency").count(),
        3,
        "{stdout}"
    );

    // One level keeps the single-result shape.
    let (o, v) = bench(
        &e.url,
        &["--concurrency", "2", "--requests", "2", "--max-tokens", "2"],
        &e.path("one.json"),
    );
    assert!(o.status.success(), "{}", text(&o));
    let v = v.unwrap();
    assert!(v.get("levels").is_none());
    assert_eq!(v["load"]["concurrency"], 2);
}

#[test]
fn distributions_carry_the_sample_standard_deviation() {
    use bakeoff::metrics::stats::Distribution;
    let d = Distribution::from_samples(&[1.0, 2.0, 3.0, 4.0], 0).unwrap();
    assert_eq!(d.mean, 2.5);
    assert!((d.std - (5.0f64 / 3.0).sqrt()).abs() < 1e-12, "{}", d.std);
    assert_eq!(Distribution::from_samples(&[7.0], 0).unwrap().std, 0.0);
}
