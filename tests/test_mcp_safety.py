"""Model-supplied work is bounded: a timed-out tool is stopped for real, a regex cannot freeze the server,
and a malformed JSON-RPC line gets an error reply."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from pydantic import BaseModel, Field

from warpgrad.agent.mcp_server import build_server
from warpgrad.tools import workspace as ws_tools
from warpgrad.tools.forked_call import ToolCancelled, ToolTimeout, run_bounded
from warpgrad.tools.ledger import Ledger
from warpgrad.tools.registry import ToolError, ToolSpec, load_tools


class SleepArgs(BaseModel):
    s: float = Field(gt=0)


class Done(BaseModel):
    ok: bool


def _sleep_then_record(args: SleepArgs, workspace: Path) -> Done:
    time.sleep(args.s)
    Ledger(workspace).append("late", {"after_s": args.s})
    return Done(ok=True)


LATE = {"late": ToolSpec("late", "Sleeps, then writes to the ledger.", SleepArgs, Done, _sleep_then_record)}


def test_a_timed_out_tool_is_stopped_and_its_late_result_never_reaches_the_ledger(tmp_path):
    async def go():
        async with Client(build_server(tmp_path, LATE, tool_timeout=1.0)) as client:
            t0 = time.monotonic()
            r = await client.call_tool("late", {"s": 2.5})
            took = time.monotonic() - t0
            ok = await client.call_tool("late", {"s": 0.1})
            return r, took, ok

    r, took, ok = anyio.run(go)
    # The message and the ledger below show the call was stopped; `took` only catches a hang (a loaded machine
    # can be slow; the latency itself is measured in bench/bench_bounded.py).
    assert r.is_error and "timed out after 1 s" in r.content[0].text and took < 60
    assert not ok.is_error
    time.sleep(2.5)  # past the moment the killed call would have written
    kinds = [rec.payload.get("after_s") for rec in Ledger(tmp_path).read()[0]]
    assert kinds == [0.1]


def test_run_bounded_returns_values_and_errors_and_kills_at_the_timeout():
    assert run_bounded(lambda: {"x": 1}, 5) == {"x": 1}

    def refuse():
        raise ToolError("no")

    with pytest.raises(ToolError, match="no"):
        run_bounded(refuse, 5)
    t0 = time.monotonic()
    with pytest.raises(ToolTimeout):
        run_bounded(lambda: time.sleep(30), 0.5)
    assert time.monotonic() - t0 < 25  # the sleep is 30 s: a hang-catcher (bench/bench_bounded.py)


def test_a_catastrophic_regex_is_stopped_with_an_error_and_the_server_keeps_serving(tmp_path, monkeypatch):
    monkeypatch.setattr(ws_tools, "SEARCH_TIMEOUT_S", 1.0)
    (tmp_path / "a.txt").write_text("a" * 60 + "b\n", encoding="utf-8")

    async def go():
        async with Client(build_server(tmp_path, load_tools(), tool_timeout=15)) as client:
            t0 = time.monotonic()
            r = await client.call_tool("search_code", {"pattern": "(a|aa)+$", "regex": True})
            took = time.monotonic() - t0
            after = await client.call_tool("search_code", {"pattern": "aab"})
            return r, took, after

    r, took, after = anyio.run(go)
    assert r.is_error and "backtracks" in r.content[0].text and took < 60  # hang-catcher (bench/bench_bounded.py)
    assert not after.is_error and after.structured_content["hits"]


def test_a_malformed_json_rpc_line_gets_a_parse_error_reply(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "warpgrad", "mcp", "--workspace", str(tmp_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            encoding="utf-8", cwd=tmp_path)
    try:
        proc.stdin.write("{this is not json\n")
        proc.stdin.write(json.dumps({"hello": "json, but not JSON-RPC"}) + "\n")
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}) + "\n")
        proc.stdin.flush()
        replies = [json.loads(proc.stdout.readline()) for _ in range(3)]
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert replies[0]["error"]["code"] == -32700 and replies[0]["id"] is None
    assert replies[1]["error"]["code"] == -32600
    assert replies[2]["id"] == 1 and "result" in replies[2]


def test_a_cancelled_call_is_killed_before_its_side_effects(tmp_path):
    import threading

    marker = tmp_path / "late.txt"

    def slow_write() -> None:
        time.sleep(1.5)
        marker.write_text("late", encoding="utf-8")

    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    t0 = time.monotonic()
    with pytest.raises(ToolCancelled):
        run_bounded(slow_write, 30, cancel)
    assert time.monotonic() - t0 < 30  # a hang-catcher; no marker below is what shows the kill
    time.sleep(1.6)
    assert not marker.exists()
