#!/usr/bin/env python3
"""Side-by-side: bakeoff and vllm-bench against vllm-bench's own mock server with server-side
truth added (scripts/bench/mock-truth.patch), back to back at each concurrency level.

Standard library only (no numpy), no network. See scripts/bench/side-by-side.sh for the
arguments and docs/benchmarks.md for what each column means.

For every request the truth is the mock's own log (`GET /debug/emissions`, CLOCK_MONOTONIC ns):
when its handler started (`recv_ns`) and when each SSE event was handed to the response stream
(`emit_ns`). Requests are matched by the response id (bakeoff records the `id` of the chunks) or
by the `x-request-id` header (vllm-bench sends `<prefix><index>`; its detailed output lists the
requests in index order). CPU is the client process's on-CPU time (all threads, from
/proc/PID/task/*/schedstat, polled every 20 ms) inside the truth window (first request received
to last event emitted), divided by the SSE events the mock emitted in that window.
"""

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

TTFT_MS = 20
INTERVAL_MS = 10
MAX_TOKENS = 64
# Requests per stream; SBS_WAVES raises it where a level has too few events for its CPU figure
# (1 stream, 3 waves: 192 events, a few ms of CPU against the 20 ms polling).
WAVES = int(os.environ.get("SBS_WAVES", "3"))


def pct(xs, p):
    if not xs:
        return None
    s = sorted(xs)
    k = max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))
    return s[k]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url):
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def cpu_ns(pid):
    total = 0
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                    total += int(f.read().split()[0])
            except OSError:
                pass
    except OSError:
        return None
    return total


class CpuSampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.samples, self.stop = pid, [], False

    def run(self):
        while not self.stop:
            c = cpu_ns(self.pid)
            if c is None:
                break
            self.samples.append((time.monotonic_ns(), c))
            time.sleep(0.02)

    def at(self, t):
        """CPU ns at monotonic time t, interpolated between samples."""
        s = self.samples
        if not s:
            return None
        if t <= s[0][0]:
            return s[0][1]
        for (t0, c0), (t1, c1) in zip(s, s[1:]):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * (t - t0) / max(1, t1 - t0)
        return s[-1][1]


def run_client(cmd, log):
    with open(log, "w") as lf:
        p = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT)
        smp = CpuSampler(p.pid)
        smp.start()
        rc = p.wait()
        smp.stop = True
    if rc != 0:
        sys.exit(f"client failed (exit {rc}): {' '.join(cmd)}; see {log}")
    return smp


def truth_stats(recs):
    start = min(r["recv_ns"] for r in recs)
    end = max(r["emit_ns"][-1] for r in recs if r["emit_ns"])
    events = sum(len(r["emit_ns"]) for r in recs)
    content = sum(k == "content" for r in recs for k in r["kinds"])
    return start, end, events, content


def errors(pairs, level):
    """pairs: (index, truth record, client ttft ns, client content offsets ns or gaps ns)."""
    ttft_all, ttft_warm, gap_err, zero_gaps, truth_zero = [], [], [], 0, 0
    for index, rec, c_ttft_ns, c_gaps_ns in pairs:
        t_content = [t for t, k in zip(rec["emit_ns"], rec["kinds"]) if k == "content"]
        t_ttft = t_content[0] - rec["recv_ns"]
        e = (c_ttft_ns - t_ttft) / 1e6
        ttft_all.append(e)
        if index >= level:
            ttft_warm.append(e)
        t_gaps = [b - a for a, b in zip(t_content, t_content[1:])]
        if len(t_gaps) != len(c_gaps_ns):
            continue
        for tg, cg in zip(t_gaps, c_gaps_ns):
            gap_err.append(abs(cg - tg) / 1e6)
            zero_gaps += cg == 0
            truth_zero += tg < 1000
    return ttft_all, ttft_warm, gap_err, zero_gaps, truth_zero


def bakeoff_pairs(jsonl, recs):
    by_id = {r["id"]: r for r in recs}
    pairs, unmatched = [], 0
    with open(jsonl) as f:
        for line in f:
            q = json.loads(line)
            rid = (q.get("response_id") or "").split("-", 1)[-1]
            rec = by_id.get(rid)
            if rec is None or not q["ok"]:
                unmatched += 1
                continue
            out = [t for t, k in zip(q["chunk_offsets_ns"], q["chunk_kinds"]) if k & 7]
            if not out:
                unmatched += 1
                continue
            gaps = [b - a for a, b in zip(out, out[1:])]
            pairs.append((q["index"], rec, out[0], gaps))
    return pairs, unmatched


def peer_pairs(result, recs, prefix):
    by_id = {r["client_request_id"]: r for r in recs}
    pairs, unmatched = [], 0
    for i, (ttft, itl) in enumerate(zip(result["ttfts"], result["itls"])):
        rec = by_id.get(f"{prefix}{i}")
        if rec is None or not ttft:
            unmatched += 1
            continue
        pairs.append((i, rec, round(ttft * 1e9), [round(x * 1e9) for x in itl]))
    return pairs, unmatched


def summarize(name, level, pairs, unmatched, recs, smp, reported_tok_s):
    start, end, events, content = truth_stats(recs)
    ttft_all, ttft_warm, gap_err, zero, truth_zero = errors(pairs, level)
    c0, c1 = smp.at(start), smp.at(end)
    cpu_us = (c1 - c0) / 1e3 / events if c0 is not None and c1 is not None else None
    truth_tok_s = content / ((end - start) / 1e9)
    per_req_s = (TTFT_MS + (MAX_TOKENS - 1) * INTERVAL_MS) / 1e3
    offered = level * MAX_TOKENS / per_req_s
    return {
        "client": name,
        "streams": level,
        "requests_matched": len(pairs),
        "requests_unmatched": unmatched,
        "events": events,
        "ttft_err_ms": {
            "p50": pct(ttft_all, 50),
            "p99": pct(ttft_all, 99),
            "warm_p50": pct(ttft_warm, 50),
            "warm_p99": pct(ttft_warm, 99),
        },
        "gap_err_ms": {"p50": pct(gap_err, 50), "p99": pct(gap_err, 99), "n": len(gap_err)},
        "client_zero_gaps": zero,
        "truth_zero_gaps": truth_zero,
        "cpu_us_per_event": cpu_us,
        "truth_tok_s": truth_tok_s,
        "offered_tok_s": offered,
        "client_reported_tok_s": reported_tok_s,
    }


def fmt(x, nd=3):
    return "–" if x is None else f"{x:.{nd}f}"


def table(rows):
    out = [
        "| streams | client | requests matched | TTFT error p50 / p99 / warm p99 | per-gap error p50 / p99 | 0 ms gaps (truth) | CPU per event | throughput: truth / offered, reported / truth |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        t, g = r["ttft_err_ms"], r["gap_err_ms"]
        rep = r["client_reported_tok_s"]
        out.append(
            f"| {r['streams']} | {r['client']} | {r['requests_matched']}"
            f"{'' if not r['requests_unmatched'] else ' (+%d unmatched)' % r['requests_unmatched']} "
            f"| {fmt(t['p50'])} / {fmt(t['p99'])} / {fmt(t['warm_p99'])} ms "
            f"| {fmt(g['p50'])} / {fmt(g['p99'])} ms "
            f"| {r['client_zero_gaps']} ({r['truth_zero_gaps']}) "
            f"| {fmt(r['cpu_us_per_event'], 1)} µs "
            f"| {r['truth_tok_s'] / r['offered_tok_s']:.3f}, "
            f"{'–' if rep is None else '%.3f' % (rep / r['truth_tok_s'])} |"
        )
    return "\n".join(out)


def main():
    if len(sys.argv) < 5:
        sys.exit("usage: side_by_side.py BAKEOFF VLLM_BENCH MOCK OUT_DIR [LEVELS]")
    bakeoff, peer, mock, out = sys.argv[1:5]
    levels = [int(x) for x in (sys.argv[5] if len(sys.argv) > 5 else "1,16,256,1024").split(",")]
    os.makedirs(out, exist_ok=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    mlog = open(os.path.join(out, "mock.log"), "w")
    srv = subprocess.Popen(
        [mock, "--port", str(port), "--token-interval-ms", str(INTERVAL_MS),
         "--first-token-delay-ms", str(TTFT_MS), "--num-tokens", str(MAX_TOKENS)],
        stdout=mlog, stderr=subprocess.STDOUT)
    try:
        for _ in range(100):
            try:
                http("GET", base + "/v1/models")
                break
            except OSError:
                time.sleep(0.1)
        rows = []
        meta = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "loadavg_before": open("/proc/loadavg").read().split()[:3],
                "cpus": os.cpu_count(), "levels": levels,
                "mock": {"first_token_delay_ms": TTFT_MS, "token_interval_ms": INTERVAL_MS,
                         "tokens": MAX_TOKENS}, "waves": WAVES}
        # vllm-bench's random dataset decodes random token ids, which panics with its built-in
        # tiktoken vocabularies (ids with no entry); its custom dataset takes prompts as given.
        prompts = os.path.join(out, "prompts.jsonl")
        with open(prompts, "w") as f:
            for i in range(max(levels) * WAVES):
                f.write(json.dumps({"prompt": f"Say something about benchmarks, please. ({i})",
                                    "output_tokens": MAX_TOKENS}) + "\n")
        for level in levels:
            n = level * WAVES
            # bakeoff first, then the peer, back to back against the same server.
            http("DELETE", base + "/debug/emissions")
            jl, bj = os.path.join(out, f"bakeoff-{level}.jsonl"), os.path.join(out, f"bakeoff-{level}.json")
            smp = run_client([bakeoff, "bench", base, "--model", "mock-model", "--prompt",
                              "Say something about benchmarks, please.",
                              "--max-tokens", str(MAX_TOKENS), "--ignore-eos",
                              "--concurrency", str(level), "--requests", str(n),
                              "--json", bj, "--requests-jsonl", jl, "--no-progress"],
                             os.path.join(out, f"bakeoff-{level}.log"))
            recs = http("GET", base + "/debug/emissions")["requests"]
            json.dump(recs, open(os.path.join(out, f"truth-bakeoff-{level}.json"), "w"))
            pairs, un = bakeoff_pairs(jl, recs)
            rep = json.load(open(bj))
            rep_tok = rep.get("aggregate_output_tok_s")
            rows.append(summarize("bakeoff", level, pairs, un, recs, smp, rep_tok))

            http("DELETE", base + "/debug/emissions")
            prefix = "sbs-"
            smp = run_client([peer, "--backend", "openai-chat", "--base-url", base,
                              "--endpoint", "/v1/chat/completions", "--model", "mock-model",
                              "--tokenizer", "cl100k_base", "--dataset-name", "custom",
                              "--dataset-path", prompts, "--custom-output-len", str(MAX_TOKENS),
                              "--ignore-eos", "--num-prompts", str(n),
                              "--max-concurrency", str(level), "--request-id-prefix", prefix,
                              "--save-result", "--save-detailed", "--disable-tqdm", "--result-dir", out,
                              "--result-filename", f"peer-{level}.json"],
                             os.path.join(out, f"peer-{level}.log"))
            recs = http("GET", base + "/debug/emissions")["requests"]
            json.dump(recs, open(os.path.join(out, f"truth-peer-{level}.json"), "w"))
            res = json.load(open(os.path.join(out, f"peer-{level}.json")))
            pairs, un = peer_pairs(res, recs, prefix)
            rows.append(summarize("vllm-bench", level, pairs, un, recs, smp,
                                  res.get("output_throughput")))
            print(table(rows[-2:]).split("\n", 2)[2], flush=True)
        meta["loadavg_after"] = open("/proc/loadavg").read().split()[:3]
        json.dump({"meta": meta, "rows": rows}, open(os.path.join(out, "side-by-side.json"), "w"), indent=1)
        md = (f"Run of {meta['started_at']}, {meta['cpus']} CPUs, load average before "
              f"{' '.join(meta['loadavg_before'])}, after {' '.join(meta['loadavg_after'])}.\n\n"
              + table(rows) + "\n")
        open(os.path.join(out, "side-by-side.md"), "w").write(md)
        print(md)
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait()


if __name__ == "__main__":
    main()
