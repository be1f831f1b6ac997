#!/usr/bin/env python3
"""Writes the seed replay (examples/seed-replay) as a campaign over LANES Slurm lanes.

    fleet_seed.py LANES OUT_DIR BAKEOFF_BIN PORT JOB_PREFIX

The same arms, workload, gates and policy as examples/seed-replay/campaign.toml; only where the
arms run changes: `[lane]` becomes LANES `[[lanes]]` tables n1..nN on the test cluster's nodes
node1..nodeN (partition `fleet`, scripts/infra/slurm.sh up DIR --nodes N), the incumbent's lane
n1, and every arm a Slurm job (`[arms.slurm]`) running the same reference-engine profile and seed
(`bakeoff engine`) on its lane's node. With LANES = 1 it is the one-lane run of the same Slurm
arms, the baseline of scripts/bench/fleet-seed.sh.
"""
import re
import shutil
import sys
import tomllib
from pathlib import Path

lanes, out, binary, port, prefix = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
src = Path(__file__).resolve().parents[2] / "examples" / "seed-replay"
out.mkdir(parents=True, exist_ok=False)
shutil.copytree(src / "profiles", out / "profiles")
for f in ("quality.toml", "kv-scale-warning.sh"):
    shutil.copy2(src / f, out / f)

text = (src / "campaign.toml").read_text()
tomllib.loads(text)  # the source parses

lane_tables = []
for n in range(1, lanes + 1):
    t = f'[[lanes]]\nid = "n{n}"\nslurm_node = "node{n}"\nport = {port}\nready_timeout_s = 30\nstop_grace_s = 5\n'
    t += f'env = {{ BAKEOFF_BIN = "{binary}" }}\n'
    if n == 1:
        t += 'incumbent = "incumbent"\n'
    lane_tables.append(t)
text, k = re.subn(r"\[lane\]\n(?:[^\[\n][^\n]*\n)+", "\n".join(lane_tables) + "\n", text, count=1)
assert k == 1, "no [lane] table in the seed replay"
text = re.sub(r'(?m)^output = .*$', 'output = "bundle"', text, count=1)


def slurm(arm_id, argv):
    q = ", ".join(f'"{a}"' for a in argv)
    return (f'[arms.slurm]\nargv = [{q}]\njob_name = "{prefix}-{arm_id}"\n'
            f'partition = "fleet"\ntime_limit = "30:00"\n')


def arms_blocks(t):
    # Each [[arms]] block with its id, rewritten in place.
    parts = re.split(r"(?m)^(?=\[\[arms\]\]$)", t)
    head, blocks = parts[0], parts[1:]
    new = []
    for b in blocks:
        arm_id = re.search(r'(?m)^id = "([^"]+)"', b).group(1)
        ref = re.search(r'(?m)^\[arms\.reference\]\nprofile = "([^"]+)"\n(?:seed = (\d+)\n)?', b)
        if ref:
            prof = tomllib.loads((src / ref.group(1)).read_text())
            argv = [binary, "engine", "--profile", ref.group(1)]
            if ref.group(2):
                argv += ["--seed", ref.group(2)]
            argv += ["--host", "0.0.0.0", "--port", str(port)]
            served = f'served_model = "{prof["model"]}"\nserved_context = {prof["context_tokens"]}\n'
            b = b[:ref.start()] + served + slurm(arm_id, argv) + b[ref.end():]
        else:
            proc = re.search(r'(?m)^\[arms\.process\]\nargv = \[(.*)\]\n', b)
            assert proc, f"arm {arm_id}: neither a reference nor a process arm"
            argv = [a.strip().strip('"') for a in proc.group(1).split(",")]
            argv = ["0.0.0.0" if a == "127.0.0.1" else str(port) if a == "18190" else a for a in argv]
            b = b[:proc.start()] + slurm(arm_id, argv) + b[proc.end():]
        new.append(b)
    return head + "".join(new)


text = arms_blocks(text)
tomllib.loads(text)
(out / "campaign.toml").write_text(text)
print(out / "campaign.toml")
