#!/usr/bin/env python3
"""Run llama.cpp's own HTTP server (the C++ `llama-server` code) from the xllamacpp wheel.

xserve.py --model M.gguf --host 127.0.0.1 --port 8080 --ctx 8192 --parallel 2 --threads 2
          [--chat-template-file F] [--alias NAME] [--metrics]
Same endpoints and JSON as `llama-server`. Exits 0 on SIGTERM / SIGINT.
"""
import argparse, signal, sys, threading
import xllamacpp

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--model", required=True)
ap.add_argument("--host", default="127.0.0.1")
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--ctx", type=int, default=8192)
ap.add_argument("--parallel", type=int, default=2)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--chat-template-file")
ap.add_argument("--alias")
ap.add_argument("--metrics", action="store_true")
a = ap.parse_args()

p = xllamacpp.CommonParams()
p.model.path = a.model
p.hostnames = [a.host]
p.port = a.port
p.n_ctx = a.ctx
p.n_parallel = a.parallel
p.cpuparams.n_threads = a.threads
p.cpuparams_batch.n_threads = a.threads
p.endpoint_metrics = a.metrics
p.use_jinja = True
if a.alias:
    p.model_alias = {a.alias}
if a.chat_template_file:
    with open(a.chat_template_file, encoding="utf-8") as f:
        p.chat_template = f.read()

stop = threading.Event()
for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda *_: stop.set())
server = xllamacpp.Server(p)  # loads the model, starts the HTTP threads and returns
print(f"xserve: listening on http://{a.host}:{a.port}", file=sys.stderr, flush=True)
while not stop.wait(0.5):
    pass
sys.exit(0)
