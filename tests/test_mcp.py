"""`warpgrad mcp`: the registry over MCP, in process and over a real stdio session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from pydantic import BaseModel, Field

from warpgrad.agent.host_config import build_plugin, print_config
from warpgrad.agent.mcp_server import PROMPT_NAME, build_server
from warpgrad.tools.registry import ToolSpec, load_tools


class NArgs(BaseModel):
    n: int = Field(gt=0, description="A positive integer.")


class NResult(BaseModel):
    square: int


def _crash(args: NArgs, workspace: Path) -> NResult:
    raise RuntimeError("segfault-ish")


def _slow(args: NArgs, workspace: Path) -> NResult:
    time.sleep(args.n)
    return NResult(square=args.n**2)


LOCAL = {
    "square": ToolSpec("square", "Square n.", NArgs, NResult, lambda a, w: NResult(square=a.n**2)),
    "crash": ToolSpec("crash", "Crashes.", NArgs, NResult, _crash),
    "slow": ToolSpec("slow", "Sleeps n seconds.", NArgs, NResult, _slow, long_running=True),
}


def run(fn, *args):
    return anyio.run(fn, *args)


def test_every_registry_tool_is_listed_with_schemas_and_read_only_or_destructive_annotations(tmp_path):
    registry = load_tools()

    async def go():
        async with Client(build_server(tmp_path)) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in run(go)}
    assert set(registry) <= set(tools) and "read_reference" in tools
    for name, spec in registry.items():
        t = tools[name]
        assert t.input_schema == spec.input_schema() and t.output_schema == spec.output_schema()
        assert t.description == spec.description
        assert t.annotations.read_only_hint is spec.read_only
        assert t.annotations.destructive_hint is (not spec.read_only)
    if "edit_file" in tools:
        assert tools["edit_file"].annotations.destructive_hint is True
        assert tools["read_file"].annotations.read_only_hint is True


def test_a_read_only_registry_tool_returns_structured_content_and_bad_arguments_return_is_error(tmp_path):
    (tmp_path / "sim.py").write_text("import warp as wp\nx = 1\n", encoding="utf-8")

    async def go():
        async with Client(build_server(tmp_path)) as client:
            ok = await client.call_tool("read_file", {"path": "sim.py"})
            bad = await client.call_tool("read_file", {"path": "sim.py", "max_lines": -4})
            outside = await client.call_tool("read_file", {"path": "../../etc/passwd"})
            again = await client.call_tool("read_file", {"path": "sim.py", "start_line": 2})
            full = await client.call_tool("read_file", {"path": "sim.py", "detail": "full"})
            record = await client.read_resource(ok.content[1].uri)
            return ok, bad, outside, again, full, record

    ok, bad, outside, again, full, record = run(go)
    assert not ok.is_error and ok.structured_content["total_lines"] == 2
    # The text is the one-screen answer (a file window: its numbered lines); the link reads back the record.
    assert "x = 1" in ok.content[0].text and ok.content[1].type == "resource_link"
    assert json.loads(record.contents[0].text) == ok.structured_content
    assert json.loads(full.content[0].text) == full.structured_content == ok.structured_content
    assert bad.is_error and "max_lines" in bad.content[0].text
    assert outside.is_error
    assert not again.is_error and "x = 1" in again.structured_content["text"]


def test_a_crashing_tool_a_timeout_and_an_unknown_tool_return_is_error_and_the_server_keeps_serving(tmp_path):
    progress = []

    async def on_progress(value, total, message):
        progress.append(message)

    async def go():
        async with Client(build_server(tmp_path, LOCAL, tool_timeout=3.0)) as client:
            crash = await client.call_tool("crash", {"n": 1})
            slow = await client.call_tool("slow", {"n": 5}, progress_callback=on_progress)
            unknown = await client.call_tool("nope", {})
            after = await client.call_tool("square", {"n": 7})
            return crash, slow, unknown, after

    crash, slow, unknown, after = run(go)
    assert crash.is_error and "RuntimeError: segfault-ish" in crash.content[0].text
    assert slow.is_error and "timed out after 3 s" in slow.content[0].text
    assert unknown.is_error and "unknown tool 'nope'" in unknown.content[0].text
    assert not after.is_error and after.structured_content == {"square": 49}
    # A long-running tool sends progress while it runs (here every 2 s of the 3 s it was given).
    assert progress and progress[0].startswith("slow: running for")


def test_the_skill_is_a_prompt_and_the_references_are_resources(tmp_path):
    from warpgrad.agent import prompt
    from warpgrad.agent.context import agent_tools, render_skill_for

    async def go():
        async with Client(build_server(tmp_path)) as client:
            prompts = (await client.list_prompts()).prompts
            got = await client.get_prompt(PROMPT_NAME, {"script": "train.py"})
            resources = (await client.list_resources()).resources
            first = next(r for r in resources if str(r.uri).startswith("warpgrad://references/"))
            body = await client.read_resource(str(first.uri))
            return prompts, got, resources, first, body

    prompts, got, resources, first, body = run(go)
    assert [p.name for p in prompts] == [PROMPT_NAME] == ["warp-debug-gradients"]
    text = got.messages[0].content.text
    assert text.startswith(render_skill_for(agent_tools())) and "train.py" in text
    assert len([r for r in resources if "references" in str(r.uri)]) == len(prompt.reference_names())
    assert body.contents[0].text == prompt.read_reference(first.name)


def test_print_config_gives_a_claude_code_line_with_the_name_before_env_and_json_for_desktop(tmp_path):
    line = print_config("claude-code", tmp_path)
    words = line.split()
    assert words[:4] == ["claude", "mcp", "add", "warpgrad"] and words[4] == "-e"
    assert words.index("--") > words.index("-e")
    assert line.endswith(f"warpgrad mcp --workspace {tmp_path.resolve()}")
    for host in ("claude-desktop", "cursor"):
        entry = json.loads(print_config(host, tmp_path))["mcpServers"]["warpgrad"]
        assert entry["args"] == ["mcp", "--workspace", str(tmp_path.resolve())]
        assert Path(entry["command"]).name == "warpgrad"
    hook = json.loads(print_config("claude-code-hooks", tmp_path))["hooks"]["Stop"][0]["hooks"][0]
    assert hook["type"] == "command" and hook["command"].endswith(
        f"stop-hook --workspace {tmp_path.resolve()}"
    )


def test_the_plugin_bundle_holds_the_skill_the_mcp_config_and_the_stop_hook(tmp_path):
    from warpgrad.agent import prompt

    files = build_plugin(tmp_path / "plugin")
    root = tmp_path / "plugin"
    assert (
        json.loads((root / ".claude-plugin" / "plugin.json").read_text(encoding="utf-8"))["name"]
        == "warpgrad"
    )
    assert json.loads((root / ".mcp.json").read_text(encoding="utf-8"))["mcpServers"]["warpgrad"]["args"] == [
        "mcp"
    ]
    assert "stop-hook" in (root / "hooks" / "hooks.json").read_text(encoding="utf-8")
    skill_dir = root / "skills" / prompt.SKILL_NAME
    skill = (skill_dir / "SKILL.md").read_text(encoding="utf-8")
    assert skill.startswith("---") and f"name: {prompt.SKILL_NAME}" in skill.split("---")[1]
    assert sorted(p.name for p in (skill_dir / "references").glob("*.md")) == prompt.reference_names()
    assert all(f.exists() for f in files)


def test_a_real_stdio_session_lists_tools_calls_them_reads_a_reference_and_gets_the_prompt(tmp_path):
    from warpgrad.agent import prompt

    (tmp_path / "train.py").write_text("print('hello from user code')\n", encoding="utf-8")
    # The launcher users run (the venv's console script), not an in-process shortcut.
    params = StdioServerParameters(
        command=str(Path(sys.executable).parent / "warpgrad"),
        args=["mcp", "--workspace", str(tmp_path)],
        env=dict(os.environ),
        cwd=str(tmp_path),
    )

    async def go():
        async with Client(params, read_timeout_seconds=60) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            unknown = await client.call_tool("read_reference", {"name": "no-such-reference"})
            read = await client.call_tool("read_file", {"path": "train.py"})
            resource = await client.read_resource("warpgrad://references/quick-checks.md")
            skill = await client.get_prompt(PROMPT_NAME, {"script": "train.py"})
            return names, unknown, read, resource, skill

    names, unknown, read, resource, skill = anyio.run(go)
    assert {"read_reference", "read_file", "gradcheck", "finish"} <= set(names)
    assert unknown.is_error and "quick-checks.md" in unknown.content[0].text
    assert not read.is_error and "hello from user code" in read.structured_content["text"]
    assert resource.contents[0].text == prompt.read_reference("quick-checks.md")
    assert "`train.py`" in skill.messages[0].content.text


NOISY_SERVER = """
import subprocess
from pydantic import BaseModel
from warpgrad.tools.registry import tool

class NoArgs(BaseModel):
    pass

class Done(BaseModel):
    ok: bool

@tool(args=NoArgs, result=Done)
def noisy(args, workspace):
    \"\"\"Prints to stdout from Python and from a child process.\"\"\"
    print("stray print from a tool", flush=True)
    subprocess.run(["echo", "stray output of a child process"], check=True)
    return Done(ok=True)

import runpy
runpy.run_module("warpgrad.cli.agent", run_name="__main__")
"""


def test_prints_from_tools_and_their_child_processes_never_reach_the_protocol_stream(tmp_path):
    msgs = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "noisy", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    ]
    proc = subprocess.Popen(
        [sys.executable, "-c", NOISY_SERVER, "mcp", "--workspace", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        cwd=tmp_path,
    )
    try:
        for m in msgs:
            proc.stdin.write(json.dumps(m) + "\n")
        proc.stdin.flush()
        # Requests are served concurrently: keep stdin open until all three answers are in.
        replies = [json.loads(proc.stdout.readline()) for _ in range(3)]  # each stdout line is JSON-RPC
        rest, err = proc.communicate(timeout=30)  # closes stdin: the server must exit on EOF
    finally:
        proc.kill()
    assert rest == ""
    by_id = {r["id"]: r for r in replies}
    assert sorted(by_id) == [1, 2, 3]
    assert by_id[2]["result"]["structuredContent"] == {"ok": True}
    assert "stray print from a tool" in err and "stray output of a child process" in err


def _stop_hook(workspace: Path, hook_input: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "warpgrad.cli.agent", "stop-hook"],
        check=False,
        input=json.dumps(hook_input),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        cwd=workspace,
    )


def test_the_stop_hook_holds_an_unproven_patch_and_lets_a_diagnosis_only_session_stop(tmp_path):
    from warpgrad.tools.workspace import undo

    (tmp_path / "sim.py").write_text("loss = x * 2.0\n", encoding="utf-8")
    assert _stop_hook(tmp_path, {"cwd": str(tmp_path)}).returncode == 0  # warpgrad never ran here
    load_tools()["edit_file"].call({"path": "sim.py", "old_text": "2.0", "new_text": "3.0"}, tmp_path)
    held = _stop_hook(tmp_path, {"cwd": str(tmp_path), "stop_hook_active": False})
    assert held.returncode == 2 and "the fix is not proven" in held.stderr and "Missing:" in held.stderr
    undo(tmp_path)
    assert _stop_hook(tmp_path, {"cwd": str(tmp_path)}).returncode == 0


@pytest.mark.warp
def test_over_stdio_gradcheck_on_a_broken_program_returns_its_failing_signature_as_structured_content(
    tmp_path,
):
    from programs import write_program

    write_program(tmp_path, "no_requires_grad")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "warpgrad.cli.agent", "mcp", "--workspace", str(tmp_path)],
        env=dict(os.environ),
        cwd=str(tmp_path),
    )

    async def go():
        async with Client(params, read_timeout_seconds=300) as client:
            await client.list_tools()  # the client validates structured content against the listed schema
            return await client.call_tool(
                "gradcheck", {"script": "train.py", "record": False, "directions": 1}
            )

    result = anyio.run(go)
    assert not result.is_error, result.content[0].text
    assert result.structured_content["passed"] is False and result.structured_content["signature"] == "zero"


@pytest.mark.warp
def test_a_model_finishing_a_session_over_mcp_reads_the_report_from_finish(tmp_path):
    """Role-play: the model calls finish too early, reads what the gate lists (each item tagged with its
    rule), does the missing piece, finishes, and reads the report from finish's own result, since
    read_file refuses .warpgrad/."""
    from test_gate import PROBE, SIM, build_fixed_chain, tracker_payload

    from warpgrad.tools.ledger import Ledger
    from warpgrad.tools.workspace import WriteFileArgs, write_file

    (tmp_path / "sim.py").write_text(SIM, encoding="utf-8")
    write_file(WriteFileArgs(path="probe.py", content=PROBE, purpose="FD probe"), tmp_path)
    build_fixed_chain(tmp_path, skip={"tracker"})
    # a tracker run after the patch that reported an overwrite: evidence against the outcome, which finish does
    # not gather away (a missing tracker run it would make itself)
    Ledger(tmp_path).append("tracker", tracker_payload(tmp_path, ["overwrite of y in scale"]))
    summary = "y was allocated without requires_grad, so v.grad stayed zero; allocated it with requires_grad."

    async def go():
        async with Client(build_server(tmp_path)) as client:
            early = await client.call_tool("finish", {"outcome": "fixed", "summary": summary})
            tracker = await client.call_tool("instrument", {"script": "sim.py", "device": "cpu"})
            done = await client.call_tool("finish", {"outcome": "fixed", "summary": summary})
            peek = await client.call_tool("read_file", {"path": ".warpgrad/report.md"})
            return early, tracker, done, peek

    early, tracker, done, peek = run(go)
    assert early.is_error and "[G009 clean-tracker]" in early.content[0].text
    assert not tracker.is_error and tracker.structured_content["clean"] is True, tracker.content[0].text
    assert not done.is_error, done.content[0].text
    md = done.structured_content["report_markdown"]
    assert md == (tmp_path / ".warpgrad" / "report.md").read_text(encoding="utf-8")
    assert "**Outcome: fixed**" in md and summary in md
    assert "Workflow objective before -> after" in md and "final loss 8.0 -> 1.04" in md
    assert "every record signed with this machine's warpgrad key" in md
    assert peek.is_error  # the report is not readable through read_file: finish is how the model sees it


STARTUP_PROBE = """
import sys
from pathlib import Path

import anyio
from mcp import Client
from warpgrad.agent.mcp_server import build_server

HEAVY = ("numpy", "warp", "warpgrad.tools.registry", "warpgrad.agent.context")


async def go():
    async with Client(build_server(Path(sys.argv[1]))) as client:  # entering runs `initialize`
        at_init = [m for m in HEAVY if m in sys.modules]
        names = [t.name for t in (await client.list_tools()).tools]
        after_list = [m for m in HEAVY if m in sys.modules]
    print(at_init, "gradcheck" in names, after_list)


anyio.run(go)
"""


def test_initialize_imports_no_tool_module_and_the_first_tools_list_loads_them(tmp_path):
    # A fresh interpreter: this test process has long imported everything.
    p = subprocess.run([sys.executable, "-c", STARTUP_PROBE, str(tmp_path)], capture_output=True, text=True,
                       timeout=120, check=True)
    assert p.stdout.strip().splitlines()[-1] == (
        "[] True ['numpy', 'warpgrad.tools.registry', 'warpgrad.agent.context']"
    )


def test_the_warpgrad_mcp_fast_path_keeps_the_command_line_of_the_full_tree(tmp_path):
    launcher = str(Path(sys.executable).parent / "warpgrad")
    helped = subprocess.run([launcher, "mcp", "--help"], capture_output=True, text=True, timeout=60, check=True)
    assert "--workspace" in helped.stdout and "--print-config" in helped.stdout
    config = subprocess.run([launcher, "mcp", "--workspace", str(tmp_path), "--print-config", "claude-code"],
                            capture_output=True, text=True, timeout=60, check=True)
    assert str(tmp_path) in config.stdout
    bad = subprocess.run([launcher, "mcp", "--workspace", str(tmp_path / "missing")], capture_output=True,
                         text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "is not a folder" in bad.stderr


WARM_ONLY_FOR_FORKING = """
import sys
from pathlib import Path
from pydantic import BaseModel
from warpgrad.agent.mcp_server import _run_tool_bounded
from warpgrad.tools import worker
from warpgrad.tools.registry import ToolSpec

class NoArgs(BaseModel):
    pass

class Done(BaseModel):
    ok: bool

tools = {name: ToolSpec(name, "Does nothing.", NoArgs, Done, lambda a, w: Done(ok=True), forks=forks)
         for name, forks in (("plain", False), ("forking", True))}
ws, seen = Path(sys.argv[1]), []
for name in ("plain", "forking"):
    out, is_error, _ = _run_tool_bounded(tools, name, {}, ws, 60, __import__("threading").Event(), warm_worker=True)
    seen.append((name, is_error, worker.active_pool() is not None))
print(seen)
"""


def test_the_server_boots_its_warm_worker_only_for_a_tool_declared_to_fork_its_runs(tmp_path):
    p = subprocess.run([sys.executable, "-c", WARM_ONLY_FOR_FORKING, str(tmp_path)], capture_output=True, text=True,
                       timeout=120, check=False, env={k: v for k, v in os.environ.items() if k != "WARPGRAD_WORKER"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[('plain', False, False), ('forking', False, True)]"
