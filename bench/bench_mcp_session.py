"""Benchmark: a 10-call MCP session over a real stdio client, against the tools' own work.

Run: `python bench/bench_mcp_session.py [--example examples/bouncing_chain/train.py] [--startups 5]
[--out bench/results/mcp_session.json]`

1. Start-up: the wall time from spawning `warpgrad mcp` (the console script users run) to the answer
   to `initialize`, median of `--startups` spawns; and the same to the answer to `tools/list`.
2. The session of issue 14 on a copy of the example, in its own kernel cache: workspace_overview,
   run_script, gradcheck x3, instrument, inspect_tape, edit_file, gradcheck, run_script. A first session
   in process on a throw-away copy fills the kernel cache (the script's modules, the tracker's build,
   warpgrad's helpers), so every number below is warm. Each call is timed at the client, and after each
   call that runs the script, the script itself runs once (alternating, so both see the same load). The
   tool's own work is the same call made in process (`run_tool`: no MCP, no fork per call) on a second
   copy right after; a call's overhead is the difference. The session total is compared with the sum of
   the script's own runs (one per call that runs it).

3. `--leak N`: N calls (run_script and read_file alternating) on one server; the server's resident memory
   (VmRSS, and its peak VmHWM, from /proc) after the first call and after the last. Each tool call runs in
   a forked child, so the server itself should not grow with the number of calls.

The machine's load moves every number, so the ratios come from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = Path(sys.executable).parent / "warpgrad"


class Call(BaseModel):
    tool: str
    arguments: dict[str, Any]
    runs_script: bool


def session(script: str) -> list[Call]:
    """The 10 calls of issue 14's session (the edit lowers the learning rate: a real, harmless patch)."""
    return [
        Call(tool="workspace_overview", arguments={}, runs_script=False),
        Call(tool="run_script", arguments={"script": script}, runs_script=True),
        Call(tool="gradcheck", arguments={"script": script}, runs_script=True),
        Call(tool="gradcheck", arguments={"script": script, "iteration": 0}, runs_script=True),
        Call(tool="gradcheck", arguments={"script": script, "iteration": 2}, runs_script=True),
        Call(tool="instrument", arguments={"script": script, "iterations": 2}, runs_script=True),
        Call(tool="inspect_tape", arguments={"script": script}, runs_script=True),
        Call(tool="edit_file", arguments={"path": script, "old_text": "LEARNING_RATE = 0.05",
                                          "new_text": "LEARNING_RATE = 0.04", "reason": "benchmark edit"},
             runs_script=False),
        Call(tool="gradcheck", arguments={"script": script}, runs_script=True),
        Call(tool="run_script", arguments={"script": script}, runs_script=True),
    ]


def _params(ws: Path, env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=str(LAUNCHER), args=["mcp", "--workspace", str(ws)], env=env, cwd=str(ws))


def startup(ws: Path, env: dict[str, str]) -> tuple[float, float]:
    """Seconds from spawning the server to the `initialize` answer, and to the `tools/list` answer."""

    async def go() -> tuple[float, float]:
        t = time.perf_counter()
        async with Client(_params(ws, env), read_timeout_seconds=120) as client:
            t_init = time.perf_counter() - t
            await client.list_tools()
            return t_init, time.perf_counter() - t

    return anyio.run(go)


def mcp_session(ws: Path, env: dict[str, str], calls: list[Call], own_ws: Path,
                entry: str) -> tuple[list[float], list[bool], list[float | None]]:
    """Each call's time at the client, whether it was an error, and the script's own run right after it."""

    async def go() -> tuple[list[float], list[bool], list[float | None]]:
        times, errors, own = [], [], []
        async with Client(_params(ws, env), read_timeout_seconds=1800) as client:
            await client.list_tools()
            for c in calls:
                t = time.perf_counter()
                r = await client.call_tool(c.tool, c.arguments)
                times.append(time.perf_counter() - t)
                errors.append(bool(r.is_error))
                if r.is_error:
                    print(f"  {c.tool} returned is_error: {r.content[0].text[:300]}", file=sys.stderr)
                own.append(await anyio.to_thread.run_sync(script_run, own_ws, entry, env) if c.runs_script
                           else None)
        return times, errors, own

    return anyio.run(go)


IN_PROCESS = """
import json, sys, time
from pathlib import Path
from warpgrad.agent.context import agent_tools, run_tool
ws, calls = Path(sys.argv[1]), json.loads(sys.argv[2])
tools = agent_tools()
out = []
for c in calls:
    t = time.perf_counter()
    text, is_error, _ = run_tool(tools, c["tool"], c["arguments"], ws)
    out.append([time.perf_counter() - t, is_error])
print(json.dumps(out))
"""


def _server_memory_kib() -> dict[str, int]:
    """VmRSS and VmHWM (KiB) of this process's child `warpgrad mcp` (the server the client spawned)."""
    me = os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(fields[1]) == me and b"mcp" in cmdline:
            status = (stat.parent / "status").read_text()
            return {k: int(line.split()[1]) for line in status.splitlines()
                    for k in ("VmRSS", "VmHWM") if line.startswith(k + ":")}
    raise SystemExit("the MCP server process was not found among this process's children")


def leak(ws: Path, env: dict[str, str], script: str, n: int) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with Client(_params(ws, env), read_timeout_seconds=600) as client:
            await client.list_tools()
            first: dict[str, int] = {}
            t = time.perf_counter()
            for i in range(n):
                call = (("run_script", {"script": script, "record": False}) if i % 2 == 0
                        else ("read_file", {"path": script}))
                r = await client.call_tool(*call)
                if r.is_error:
                    raise SystemExit(f"{call[0]} failed: {r.content[0].text[:300]}")
                if i == 0:
                    first = _server_memory_kib()
            last = _server_memory_kib()
            return {"calls": n, "wall_s": time.perf_counter() - t, "after_first_call_kib": first,
                    "after_last_call_kib": last}

    return anyio.run(go)


def in_process(ws: Path, env: dict[str, str], calls: list[Call]) -> list[float]:
    """Each call's own work: `run_tool` in one process, no MCP, no fork per call."""
    p = subprocess.run([sys.executable, "-c", IN_PROCESS, str(ws), json.dumps([c.model_dump() for c in calls])],
                       cwd=ws, env=env, capture_output=True, text=True, timeout=3600, check=False)
    if p.returncode != 0:
        raise SystemExit(f"in-process session failed:\n{p.stderr[-3000:]}")
    return [t for t, _ in json.loads(p.stdout.strip().splitlines()[-1])]


def script_run(ws: Path, entry: str, env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, entry], cwd=ws, env=env, capture_output=True, timeout=600, check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--example", default="examples/bouncing_chain/train.py")
    ap.add_argument("--startups", type=int, default=5)
    ap.add_argument("--skip-session", action="store_true", help="Measure the start-up only.")
    ap.add_argument("--leak", type=int, default=0, help="Also make this many calls on one server and report its "
                    "memory after the first and the last.")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "mcp_session.json")
    a = ap.parse_args()
    example = ROOT / a.example
    work = Path(tempfile.mkdtemp(prefix="wg-benchmcp-"))
    try:
        env = dict(os.environ, WARP_CACHE_PATH=str(work / "cache"))
        ws_mcp, ws_direct, ws_warm, ws_own = (work / n for n in ("ws_mcp", "ws_direct", "ws_warm", "ws_own"))
        for ws in (ws_mcp, ws_direct, ws_warm, ws_own):
            shutil.copytree(example.parent, ws)
        entry = example.name
        starts = [startup(ws_mcp, env) for _ in range(a.startups)]
        result: dict[str, Any] = {
            "startup_initialize_s": statistics.median(s[0] for s in starts),
            "startup_tools_list_s": statistics.median(s[1] for s in starts),
            "startups": starts,
        }
        print(json.dumps({k: result[k] for k in ("startup_initialize_s", "startup_tools_list_s")}))
        if not a.skip_session:
            calls = session(entry)
            in_process(ws_warm, env, calls)  # fills the kernel cache: every number below is warm
            mcp_times, errors, own_runs = mcp_session(ws_mcp, env, calls, ws_own, entry)
            direct = in_process(ws_direct, env, calls)
            rows = [{"tool": c.tool, "mcp_s": m, "own_s": d, "overhead_s": m - d, "script_s": o, "is_error": e}
                    for c, m, d, o, e in zip(calls, mcp_times, direct, own_runs, errors, strict=True)]
            for r in rows:
                print(json.dumps(r))
            script_sum = sum(o for o in own_runs if o is not None)
            result |= {
                "script_s": statistics.median(o for o in own_runs if o is not None), "rows": rows, "session_s": sum(mcp_times), "own_work_s": sum(direct),
                "script_runs_sum_s": script_sum, "session_over_script_runs": sum(mcp_times) / script_sum,
                "median_overhead_s": statistics.median(r["overhead_s"] for r in rows),
                "max_overhead_s": max(r["overhead_s"] for r in rows),
            }
            print(json.dumps({k: result[k] for k in ("script_s", "session_s", "own_work_s", "script_runs_sum_s",
                                                     "session_over_script_runs", "median_overhead_s",
                                                     "max_overhead_s")}))
        if a.leak:
            result["leak"] = leak(ws_own, env, entry, a.leak)
            print(json.dumps(result["leak"]))
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
