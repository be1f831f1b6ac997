#!/usr/bin/env python3
"""Wraps an engine command so that the process group holds GPU memory and keeps the GPU busy,
like a real GPU engine does; used by scripts/gpu-campaign.sh to exercise bakeoff's GPU checks
(memory reserve, NVML samples joined to timed steps, memory released after the stop) with the
reference engine, which itself never touches a GPU.

    gpu-hold.py --mib 8192 [--busy-ms 5] -- bakeoff engine --profile P --port N

Needs PyTorch with CUDA. Forwards SIGTERM/SIGINT to the engine and exits with its status; the
memory goes back when this process exits.
"""
import argparse
import signal
import subprocess
import sys
import threading
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, required=True, help="GPU memory to hold, MiB")
    ap.add_argument("--busy-ms", type=float, default=5.0, help="matrix work per 50 ms, ms")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no engine command after --")
    try:
        import torch
    except ImportError:
        print("gpu-hold.py: PyTorch is not installed; it is needed to hold GPU memory", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu-hold.py: PyTorch sees no CUDA GPU (CUDA_VISIBLE_DEVICES=%s)" % __import__("os").environ.get("CUDA_VISIBLE_DEVICES"), file=sys.stderr)
        return 2
    held = torch.empty(a.mib * 1024 * 1024, dtype=torch.uint8, device="cuda")
    held.fill_(1)
    torch.cuda.synchronize()
    print(f"gpu-hold.py: holding {a.mib} MiB on {torch.cuda.get_device_name(0)}", file=sys.stderr, flush=True)

    stop = threading.Event()

    def busy() -> None:
        x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        while not stop.is_set():
            t = time.monotonic()
            while (time.monotonic() - t) * 1000 < a.busy_ms:
                x = (x @ x).clamp_(-1, 1)
            torch.cuda.synchronize()
            time.sleep(0.05)

    threading.Thread(target=busy, daemon=True).start()
    child = subprocess.Popen(cmd)

    def forward(sig, _frame):
        child.send_signal(sig)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    rc = child.wait()
    stop.set()
    del held
    return rc


if __name__ == "__main__":
    sys.exit(main())
