#!/usr/bin/env python3
"""Writes sample.jsonl, sample-sharegpt.json and sample-multiturn.jsonl beside this script: small, deterministic datasets of
original text (no copyrighted material) with varied prompt and output lengths, for bakeoff's tests
and examples. Run it again after editing: `python3 examples/datasets/generate.py`."""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(20261201)

TOPICS = [
    "a bicycle gear", "tide pools", "sourdough bread", "a lighthouse", "compound interest",
    "a heat pump", "bird migration", "a suspension bridge", "version control", "a sundial",
    "volcanic soil", "a paper kite", "the water cycle", "a pipe organ", "solar panels",
    "honey bees", "a wind turbine", "coral reefs", "a mechanical clock", "public libraries",
]
ASKS = [
    "Explain how {t} works to a curious twelve-year-old.",
    "Write three short tips about {t} for a beginner.",
    "List the main parts of {t} and what each one does.",
    "Describe a common misconception about {t} and correct it.",
    "Summarise the history of {t} in a few sentences.",
    "Compare {t} with something from everyday kitchen life.",
]
FILLER = (
    "Keep the answer plain and friendly. Use short sentences. Avoid jargon where a simple word "
    "will do. If a number helps, give one, and say where it comes from. End with one question the "
    "reader could explore next."
).split(". ")
NOTES = [
    "Some background: I am planning a small workshop for neighbours and want material that "
    "people can read in a couple of minutes.",
    "Context: this is for a printed handout, so please do not use tables or links.",
    "I already know the basics, so skip the definitions and go straight to the interesting part.",
    "My earlier draft was too long and nobody read it; this time it should fit on a postcard.",
]


def prompt(i):
    t = TOPICS[i % len(TOPICS)]
    ask = ASKS[(i * 7) % len(ASKS)].format(t=t)
    parts = [ask]
    # Varied lengths: 0 to 6 extra sentences and notes.
    for k in range(rng.randrange(0, 7)):
        parts.append(FILLER[k % len(FILLER)].rstrip(".") + ".")
    if rng.random() < 0.5:
        parts.insert(0, rng.choice(NOTES))
    return " ".join(parts)


def sample_jsonl():
    lines = []
    for i in range(40):
        out = rng.choice([16, 24, 32, 48, 64, 96, 128])
        if i % 8 == 5:
            line = {
                "id": f"chat-{i:02d}",
                "messages": [
                    {"role": "system", "content": "You are a patient teacher who answers briefly."},
                    {"role": "user", "content": prompt(i)},
                ],
                "output_tokens": out,
            }
        elif i % 8 == 7:
            line = {"id": f"p-{i:02d}", "prompt": prompt(i), "max_tokens": out}
        elif i % 10 == 9:
            line = {"id": f"p-{i:02d}", "prompt": prompt(i)}  # no output length: --max-tokens
        else:
            line = {"id": f"p-{i:02d}", "prompt": prompt(i), "output_tokens": out}
        lines.append(json.dumps(line, ensure_ascii=False))
    with open(os.path.join(HERE, "sample.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")


def reply(i):
    t = TOPICS[i % len(TOPICS)]
    n = rng.randrange(1, 6)
    s = [f"Here is a short answer about {t}."]
    for k in range(n):
        s.append(f"Point {k + 1}: it helps to picture {t} step by step, one part at a time.")
    return " ".join(s)


def sample_sharegpt():
    convs = []
    for i in range(20):
        c = [{"from": "human", "value": prompt(i + 100)}, {"from": "gpt", "value": reply(i)}]
        if i % 4 == 1:
            c += [{"from": "human", "value": "Thanks. Can you make it shorter?"},
                  {"from": "gpt", "value": "Sure: " + reply(i + 1)}]
        if i % 5 == 2:
            c.insert(0, {"from": "system", "value": "Answer briefly."})
        convs.append({"id": f"conv-{i:02d}", "conversations": c})
    # One conversation with no reply: skipped (and counted) like vLLM's benchmark does.
    convs.append({"id": "conv-unanswered", "conversations": [{"from": "human", "value": "Hello?"}]})
    with open(os.path.join(HERE, "sample-sharegpt.json"), "w") as f:
        json.dump(convs, f, indent=1, ensure_ascii=False)
        f.write("\n")


FOLLOW_UPS = [
    "Thanks. Can you make it shorter?",
    "Give one example from daily life.",
    "What would a beginner most often get wrong here?",
    "Now say it again for a ten-year-old.",
    "Which part of that is the most surprising?",
]


def sample_multiturn():
    """Multi-turn conversations (JSONL `messages`: an optional system message, then 3 or 4 user
    turns with the dataset's own assistant replies between them) for `bench --multi-turn
    --dataset`, which replays the user turns with the model's real replies."""
    mrng = random.Random(20261202)
    lines = []
    for i in range(8):
        t = TOPICS[(i * 3) % len(TOPICS)]
        msgs = []
        if i % 2 == 0:
            msgs.append({"role": "system", "content": "You are a patient teacher who answers briefly."})
        msgs.append({"role": "user", "content": ASKS[i % len(ASKS)].format(t=t)})
        turns = 3 + (i % 2)
        for k in range(1, turns):
            msgs.append({"role": "assistant", "content": f"Here is a short answer about {t}, part {k}."})
            msgs.append({"role": "user", "content": mrng.choice(FOLLOW_UPS)})
        line = {"id": f"conv-{i:02d}", "messages": msgs, "output_tokens": mrng.choice([16, 24, 32, 48])}
        lines.append(json.dumps(line, ensure_ascii=False))
    with open(os.path.join(HERE, "sample-multiturn.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")


sample_jsonl()
sample_sharegpt()
sample_multiturn()
