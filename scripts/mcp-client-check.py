#!/usr/bin/env python3
"""An independent MCP client of `bakeoff mcp`: the official Python MCP SDK (`mcp`, installed by
scripts/engine-setup.sh) drives a campaign from plan to verdict over stdio, as an agent would:
plan -> start -> watch (until it ends) -> verdict -> verify, and reads the result as a resource.

    mcp-client-check.py BAKEOFF ROOT CAMPAIGN OUTPUT

ROOT is the server's --root; CAMPAIGN and OUTPUT are relative to it. Prints one JSON line with
what it saw (the tool list, the plan's step count, the run's exit code and root digest, the
verdict's winner, whether the bundle verifies) and exits 0; any failure raises (exit 1).
Used by tests/real/mcp_client.rs.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client


def field(obj, snake, camel):
    """A result field under its Python name, whichever the SDK version uses."""
    v = getattr(obj, snake, None)
    return v if v is not None else getattr(obj, camel, None)


async def call(session, tool, args):
    r = await session.call_tool(tool, args)
    if field(r, "is_error", "isError"):
        texts = [getattr(c, "text", "") for c in r.content]
        raise SystemExit(f"{tool} failed: {' '.join(texts)}")
    data = field(r, "structured_content", "structuredContent")
    if data is None:
        raise SystemExit(f"{tool}: no structured content in {r!r}")
    return data


async def main(bakeoff, root, campaign, output):
    server = StdioServerParameters(
        command=bakeoff,
        args=["mcp", "--root", root],
        # The lane lock directory of the test, and nothing else added.
        env={k: v for k, v in os.environ.items() if k == "BAKEOFF_LOCK_DIR"},
    )
    seen = {}
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            seen["tools"] = sorted(t.name for t in tools.tools)
            plan = await call(session, "plan", {"campaign": campaign, "output": output})
            seen["plan_steps"] = len(plan["steps"])
            run = await call(session, "start", {"campaign": campaign, "output": output})
            handle = run["run"]
            watched = []
            while True:
                w = await call(session, "watch", {"run": handle, "wait_s": 1})
                watched.append((w["steps_done"], w["state"]))
                if w["state"] == "exited":
                    break
            seen["watch_calls"] = len(watched)
            seen["exit_code"] = w["exit_code"]
            seen["steps_done"] = w["steps_done"]
            verdict = await call(session, "verdict", {"bundle": output})
            seen["complete"] = verdict["complete"]
            seen["winner"] = verdict["winner"]
            seen["root_digest"] = verdict["root_digest"]
            checked = await call(
                session, "verify", {"bundle": output, "digest": verdict["root_digest"]}
            )
            seen["verify_ok"] = checked["ok"]
            resources = await session.list_resources()
            result = [r for r in resources.resources if r.name.endswith("campaign-result.json")]
            body = await session.read_resource(result[0].uri)
            seen["resource_complete"] = json.loads(body.contents[0].text)["complete"]
    print(json.dumps(seen))


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    asyncio.run(main(*sys.argv[1:]))
