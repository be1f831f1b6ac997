#!/usr/bin/env python3
"""Rebuild a Hugging Face tokenizer.json from the vocabulary inside a GPT-2-style (byte-level BPE) GGUF file.

No package ships SmolLM2's tokenizer.json, but its GGUF holds everything needed: tokenizer.ggml.tokens, .merges and
.token_type. The result is BPE with a Digits(individual) + ByteLevel pre-tokenizer (llama.cpp's "smollm" pre-tokenizer),
a ByteLevel decoder, and the token_type 3 (control) tokens as special added tokens.

  gguf-tokenizer.py --gguf M.gguf --out tokenizer.json [--verify-with scripts/xserve.py | --verify-url URL]

--verify-with starts llama.cpp's server (xserve.py, with this Python) on a free port and --verify-url uses a running
one: each checks that the tokenizer gives the ids of the server's /tokenize on tricky strings (digits, unicode, emoji,
whitespace, code, ChatML special tokens) and that decoding gives the text back. Exit status 1 on any difference.
Needs the PyPI packages `gguf` and `tokenizers` (pinned in scripts/engine-setup.sh).
"""
import argparse, json, os, socket, subprocess, sys, tempfile, time, urllib.request

from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

TOKEN_TYPE_NORMAL, TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED = 1, 3, 4

TRICKY = [
    "",
    "Hello world",
    "1234567890 3.14159 -42 1,000,000 x=1;y=22;z=333 0x1F 2026-11-29",
    "naïve café, Straße, 日本語のテキスト, Привет мир, ελληνικά, عربى",
    "emoji: 👋🏽 🚀🔥 👨‍👩‍👧‍👦 ✔️ 🇫🇷",
    "  leading spaces\n\n\ttabs\t\ttrailing   \n \u00a0nbsp\r\n",
    'fn main() {\n    let v: Vec<u32> = (0..10).collect();\n    println!("{:?} {}", v, v.len()); // done\n}\n',
    "def f(x):\n\treturn x**2  # square\n",
    "don't won't it's I'll they've we're DON'T",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>text<|im_end|><|im_start|>",
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
]


def field(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def build(gguf_path):
    r = GGUFReader(gguf_path)
    kind = field(r, "tokenizer.ggml.model")
    if kind != "gpt2":
        sys.exit(f"{gguf_path}: tokenizer.ggml.model is {kind!r}; only 'gpt2' (byte-level BPE) is supported")
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field(r, "tokenizer.ggml.merges")]
    vocab = {t: i for i, t in enumerate(tokens)}
    if len(vocab) != len(tokens):
        sys.exit(f"{gguf_path}: duplicate tokens in the vocabulary")

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # Added tokens take their ids from the vocab (they are in it already), in id order.
    special = [AddedToken(tokens[i], special=True, normalized=False) for i, t in enumerate(types) if t == TOKEN_TYPE_CONTROL]
    user = [AddedToken(tokens[i], special=False, normalized=False) for i, t in enumerate(types) if t == TOKEN_TYPE_USER_DEFINED]
    tok.add_special_tokens(special)
    if user:
        tok.add_tokens(user)
    for t in special + user:
        assert tok.token_to_id(t.content) == vocab[t.content], t.content
    return tok


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.load(resp)


def verify(tok, base_url):
    bad = 0
    for s in TRICKY:
        want = post(base_url + "/tokenize", {"content": s, "add_special": False})["tokens"]
        got = tok.encode(s, add_special_tokens=False).ids
        back = tok.decode(got, skip_special_tokens=False)
        if got != want or back != s:
            bad += 1
            print(f"MISMATCH for {s!r}:\n  server:    {want}\n  tokenizer: {got}\n  decoded:   {back!r}")
    print(f"tokenizer check against {base_url}/tokenize: {len(TRICKY) - bad}/{len(TRICKY)} strings match")
    return bad == 0


def with_server(xserve, gguf_path, fn):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tempfile.TemporaryFile()
    cmd = [sys.executable, xserve, "--model", gguf_path, "--host", "127.0.0.1", "--port", str(port),
           "--ctx", "2048", "--parallel", "1", "--threads", "2"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                sys.stdout.write(log.read().decode(errors="replace")[-4000:])
                sys.exit(f"server {' '.join(cmd)} did not become healthy (exit status {proc.returncode})")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.1)
        return fn(f"http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--out", help="where to write tokenizer.json")
    ap.add_argument("--verify-with", metavar="XSERVE_PY", help="start this xserve.py on a free port and check against it")
    ap.add_argument("--verify-url", metavar="URL", help="check against a running llama.cpp server")
    a = ap.parse_args()
    tok = build(a.gguf)
    ok = True
    if a.verify_with:
        ok = with_server(a.verify_with, a.gguf, lambda url: verify(tok, url)) and ok
    if a.verify_url:
        ok = verify(tok, a.verify_url.rstrip("/")) and ok
    if not ok:
        sys.exit("tokenizer.json does not match the server's tokenizer")
    if a.out:
        tmp = a.out + ".tmp"
        tok.save(tmp)
        Tokenizer.from_file(tmp)  # reads back
        os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
