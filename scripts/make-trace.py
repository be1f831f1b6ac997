#!/usr/bin/env python3
"""Writes a small original request trace for `bakeoff bench --trace` (JSONL, Mooncake field names).

Each line: `timestamp` (arrival, ms from the start), `input_length` and `output_length` (tokens),
`hash_ids` (the prompt's blocks of --block-tokens tokens, in order). Requests of one "app" start
with that app's system-prompt blocks; a follow-up turn of a conversation repeats the earlier
turn's whole blocks and adds its own, so a prefix cache can serve what the trace says is shared.
Arrivals are Poisson at --rate. Seeded: the same arguments write the same file.

    python3 scripts/make-trace.py --requests 40 --rate 10 --seed 1 > examples/traces/small.jsonl
"""
import argparse
import json
import math
import random
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--rate", type=float, default=10.0, help="mean arrivals per second")
    ap.add_argument("--block-tokens", type=int, default=512)
    ap.add_argument("--apps", type=int, default=3, help="system prompts shared by many requests")
    ap.add_argument("--system-blocks", type=int, default=2, help="blocks of each system prompt")
    ap.add_argument("--follow-up", type=float, default=0.4, help="share of requests that continue a conversation")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    next_id = 0

    def fresh(n):
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return ids

    systems = [fresh(a.system_blocks) for _ in range(a.apps)]
    conversations = []  # hash_ids of earlier requests, to continue
    t = 0.0
    for _ in range(a.requests):
        # Shared blocks are always whole; the last block is the request's own and may be cut.
        if conversations and rng.random() < a.follow_up:
            prior = rng.choice(conversations)
            ids = prior[:-1] + fresh(rng.randint(1, 2))
        else:
            ids = rng.choice(systems) + fresh(rng.randint(1, 2))
        length = (len(ids) - 1) * a.block_tokens + rng.randint(1, a.block_tokens)
        out = max(1, int(rng.lognormvariate(math.log(64), 0.6)))
        print(json.dumps({"timestamp": round(t, 3), "input_length": length,
                          "output_length": min(out, 512), "hash_ids": ids}))
        conversations.append(ids)
        t += rng.expovariate(a.rate) * 1e3
    return 0


if __name__ == "__main__":
    sys.exit(main())
