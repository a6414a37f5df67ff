"""`warpgrad chat` and `warpgrad replay`: the real anthropic client over replayed HTTP, and the terminal."""

from __future__ import annotations

import io
import json
from pathlib import Path

import anthropic
import pytest
import typer
from pydantic import BaseModel, Field
from replay_http import KEY, ReplayTransport, real_client
from rich.console import Console
from scripted import ScriptedClient, text, tool_use
from typer.testing import CliRunner

from warpgrad.agent.chat import chat, one_line, preview_diff, replay
from warpgrad.agent.loop import Agent, AgentConfig, Events
from warpgrad.agent.trajectory import read_events
from warpgrad.cli import agent as cmd_agent
from warpgrad.tools.registry import ToolSpec, load_tools


class SquareArgs(BaseModel):
    n: int = Field(gt=0, description="A positive integer.")


class SquareResult(BaseModel):
    square: int


TOOLS = {
    "square": ToolSpec(
        "square", "Square n.", SquareArgs, SquareResult, lambda a, w: SquareResult(square=a.n**2)
    )
}
SYSTEM = [{"type": "text", "text": "You are warpgrad.", "cache_control": {"type": "ephemeral"}}]


def test_the_real_client_sends_cached_tools_and_system_and_the_loop_reads_cache_usage(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    transport = ReplayTransport("tool_use.json", "end_turn.json")
    agent = Agent(
        real_client(transport), AgentConfig(model="claude-sonnet-4-6"), tmp_path, tools=TOOLS, system=SYSTEM
    )
    assert agent.run("square 3") == "3 squared is 9."
    first, second = transport.bodies()
    assert first["model"] == "claude-sonnet-4-6" and first["system"] == SYSTEM
    assert first["tools"] == [{**TOOLS["square"].anthropic_param(), "cache_control": {"type": "ephemeral"}}]
    assert first["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "stream" not in first or first["stream"] is False
    assert second["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_01FixtureSquare01",
        "name": "square",
        "input": {"n": 3},
    }
    assert second["messages"][2]["content"][0]["content"] == '{"square":9}'
    assert transport.requests[0].headers["authorization"] == f"Bearer {KEY}"  # sent, yet never recorded
    assert agent.totals["cache_creation_input_tokens"] == 5210 + 473
    assert agent.totals["cache_read_input_tokens"] == 5210
    expected = (412 + 58 + (5210 + 473) * 1.25 + 5210 * 0.1) * 3 / 1e6 + (61 + 12) * 15 / 1e6
    assert agent.totals["cost"] == pytest.approx(expected)
    raw = agent.trajectory.path.read_text(encoding="utf-8")
    assert KEY not in raw
    usage = [e["usage"] for e in read_events(agent.trajectory.path) if e.get("role") == "assistant"]
    assert usage[1]["cache_read_input_tokens"] == 5210


def test_streamed_text_reaches_the_terminal_as_it_arrives_and_the_streamed_tool_call_runs(tmp_path):
    transport = ReplayTransport("tool_use_stream.sse", "end_turn_stream.sse")
    deltas = []

    class Collect(Events):
        def on_text(self, delta):
            deltas.append(delta)

    agent = Agent(
        real_client(transport),
        AgentConfig(model="claude-sonnet-4-6", stream=True),
        tmp_path,
        tools=TOOLS,
        system=SYSTEM,
        events=Collect(),
    )
    assert agent.run("square 3") == "3 squared is 9."
    assert deltas == ["I'll square ", "it with the tool.", "3 squared ", "is 9."]
    assert all(b["stream"] is True for b in transport.bodies())
    assert json.loads(agent.messages[2]["content"][0]["content"]) == {"square": 9}
    assert agent.totals["cache_creation_input_tokens"] == 5210 + 473
    assert agent.totals["output_tokens"] == 61 + 12


def test_an_api_error_surfaces_and_the_trajectory_records_why_the_session_ended(tmp_path):
    agent = Agent(
        real_client(ReplayTransport("overloaded.json")), AgentConfig(), tmp_path, tools=TOOLS, system=SYSTEM
    )
    with pytest.raises(anthropic.APIStatusError):
        agent.run("go")
    assert "Overloaded" in read_events(agent.trajectory.path)[-1]["reason"]


def _cli() -> typer.Typer:
    app = typer.Typer()
    cmd_agent.register(app)
    return app


def test_without_an_api_key_chat_says_so_and_points_to_diagnose(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = CliRunner().invoke(_cli(), ["chat", str(tmp_path), "--script", "train.py"])
    assert result.exit_code == 2
    assert "ANTHROPIC_API_KEY" in result.output and "warpgrad diagnose" in result.output
    assert not (tmp_path / ".warpgrad").exists()


def _console() -> Console:
    return Console(file=io.StringIO(), width=120, force_terminal=False, color_system=None)


def test_a_terminal_session_shows_tool_calls_asks_before_edits_and_takes_follow_ups(tmp_path):
    (tmp_path / "sim.py").write_text("loss = x * 2.0\n", encoding="utf-8")
    client = ScriptedClient(
        tool_use("read_file", say="Reading the program.", path="sim.py"),
        tool_use("edit_file", path="sim.py", old_text="x * 2.0", new_text="x * 3.0", reason="wrong factor"),
        text("You declined; leaving it."),
        text("Bye."),
    )
    asked, inputs = [], iter(["thanks", ""])
    console = _console()
    tools = {**load_tools()}
    summary = chat(
        tmp_path,
        client,
        AgentConfig(),
        console=console,
        task="fix sim.py",
        read_input=lambda: next(inputs),
        ask=lambda q: asked.append(q) or False,
        tools=tools,
        system=SYSTEM,
    )
    out = console.file.getvalue()
    assert "Reading the program." in out
    assert "▶ read_file(path='sim.py')" in out
    assert "-loss = x * 2.0" in out and "+loss = x * 3.0" in out  # the diff, shown before asking
    assert asked == ["Apply this change?"]
    assert (tmp_path / "sim.py").read_text(encoding="utf-8") == "loss = x * 2.0\n"
    assert "The user declined this change" in client.requests[2]["messages"][-1]["content"][0]["content"]
    assert client.requests[3]["messages"][-1]["content"][-1]["text"] == "thanks"
    assert summary["stop"] == "ended by user" and Path(summary["trajectory"]).exists()
    assert tools  # the registry is untouched by the session


def test_hitting_a_limit_ends_the_chat_with_the_report_so_far(tmp_path):
    client = ScriptedClient(tool_use("square", n=2), tool_use("square", n=3))
    console = _console()
    summary = chat(
        tmp_path,
        client,
        AgentConfig(step_limit=1),
        console=console,
        task="go",
        read_input=lambda: pytest.fail("no follow-up after a limit"),
        ask=None,
        tools=TOOLS,
        system=SYSTEM,
    )
    out = console.file.getvalue()
    assert summary["stop"] == "step limit reached (1 model calls)"
    assert "What was found so far" in out and "# warpgrad report" in out
    assert len(client.requests) == 1


def test_ctrl_c_during_a_turn_keeps_the_trajectory_and_the_next_input_continues(tmp_path):
    def interrupt(request):
        raise KeyboardInterrupt

    client = ScriptedClient(interrupt, text("back again"))
    inputs = iter(["are you there?", ""])
    console = _console()
    summary = chat(
        tmp_path,
        client,
        AgentConfig(),
        console=console,
        task="start",
        read_input=lambda: next(inputs),
        ask=None,
        tools=TOOLS,
        system=SYSTEM,
    )
    assert "Stopped." in console.file.getvalue()
    assert summary["answer"] == "back again"
    events = read_events(Path(summary["trajectory"]))
    assert next(e["reason"] for e in events if e["type"] == "end") == "KeyboardInterrupt: "
    # Both user inputs went into one user turn (the first never got an answer).
    assert [b["text"] for b in client.requests[-1]["messages"][0]["content"]] == ["start", "are you there?"]


def test_resume_continues_the_latest_session_from_its_trajectory(tmp_path):
    first = chat(
        tmp_path,
        ScriptedClient(text("first answer")),
        AgentConfig(),
        console=_console(),
        task="hello",
        read_input=lambda: "",
        ask=None,
        tools=TOOLS,
        system=SYSTEM,
    )
    client = ScriptedClient(text("second answer"))
    second = chat(
        tmp_path,
        client,
        AgentConfig(),
        console=_console(),
        task="again",
        read_input=lambda: "",
        ask=None,
        resume=Path(first["trajectory"]),
        tools=TOOLS,
        system=SYSTEM,
    )
    assert second["trajectory"] == first["trajectory"] and second["answer"] == "second answer"
    sent = client.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"] and sent[1]["content"][0][
        "text"
    ] == "first answer"
    assert second["totals"]["steps"] == 2


def test_replay_reruns_recorded_tool_calls_and_reports_what_changed(tmp_path):
    (tmp_path / "sim.py").write_text("a = 1\n", encoding="utf-8")
    client = ScriptedClient(
        tool_use("read_file", path="sim.py"), tool_use("read_file", path="gone.py"), text("done")
    )
    summary = chat(
        tmp_path,
        client,
        AgentConfig(),
        console=_console(),
        task="look",
        read_input=lambda: "",
        ask=None,
        tools=load_tools(),
        system=SYSTEM,
    )
    traj = Path(summary["trajectory"])
    assert all(r["same"] for r in replay(traj, tmp_path))
    (tmp_path / "sim.py").write_text("a = 2\n", encoding="utf-8")
    (tmp_path / "gone.py").write_text("b = 1\n", encoding="utf-8")
    changed = replay(traj, tmp_path)
    assert [r["same"] for r in changed] == [False, False]
    assert any(".text" in d for d in changed[0]["differences"])
    assert changed[1]["differences"][0].startswith("is_error: True -> False")
    result = CliRunner().invoke(_cli(), ["replay", str(traj), "--json"])
    assert result.exit_code == 1 and len(json.loads(result.output)) == 2


def test_the_edit_preview_is_the_diff_the_tool_would_apply(tmp_path):
    (tmp_path / "m.py").write_text("y = a + b\n", encoding="utf-8")
    patch = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-y = a + b\n+y = a - b\n"
    assert preview_diff("apply_patch", {"diff": patch}, tmp_path) == patch
    if "edit_file" in load_tools():
        diff = preview_diff("edit_file", {"path": "m.py", "old_text": "+", "new_text": "-"}, tmp_path)
        assert "-y = a + b" in diff and "+y = a - b" in diff
    assert (
        one_line(
            {"output": '{"passed": false, "signature": "exact_factor", "factor": 2.0}', "is_error": False}
        )
        == "passed=False, signature=exact_factor, factor=2.0"
    )


def test_a_model_that_finishes_early_gets_the_gate_refusal_and_continues(tmp_path):
    client = ScriptedClient(
        tool_use("finish", outcome="fixed", summary="I think the loss was scaled twice."),
        text("The gate wants evidence first; running checks."),
        text("bye"),
    )
    console = _console()
    summary = chat(
        tmp_path,
        client,
        AgentConfig(),
        console=console,
        task="fix it",
        read_input=lambda: "",
        ask=None,
        tools=load_tools(),
        system=SYSTEM,
    )
    refusal = client.requests[1]["messages"][-1]["content"][0]
    assert refusal["is_error"] and "refused" in refusal["content"] and "Missing" in refusal["content"]
    assert (
        summary["finished"] is None and summary["answer"] == "The gate wants evidence first; running checks."
    )
    assert "✗" in console.file.getvalue()


BROKEN_TRAINING = """\
import numpy as np
import warp as wp

N, STEPS, ITERS = 8, 6, 4


@wp.kernel
def step(x: wp.array(dtype=float), v: wp.array(dtype=float), x_out: wp.array(dtype=float), dt: float):
    i = wp.tid()
    x_out[i] = x[i] + v[i] * dt + 0.1 * wp.sin(x[i])


@wp.kernel
def loss_k(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


target = wp.array(np.full(N, 0.5, dtype=np.float32), dtype=float)
v = wp.array(np.linspace(-1.0, 1.0, N).astype(np.float32), dtype=float, requires_grad=True)
for it in range(ITERS):
    xs = [wp.zeros(N, dtype=float, requires_grad=(s != STEPS)) for s in range(STEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for s in range(STEPS):
            wp.launch(step, N, inputs=[xs[s], v, xs[s + 1], 0.1])
        wp.launch(loss_k, N, inputs=[xs[STEPS], target], outputs=[loss])
    tape.backward(loss)
    v.assign(v.numpy() - 0.05 * v.grad.numpy())
    tape.zero()
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
"""


@pytest.mark.warp
@pytest.mark.slow
def test_a_scripted_session_on_a_broken_program_is_refused_early_then_fixes_it_and_finish_is_accepted(
    tmp_path,
):
    tools = load_tools()
    (tmp_path / "train.py").write_text(BROKEN_TRAINING, encoding="utf-8")
    client = ScriptedClient(
        tool_use("run_script", script="train.py"),
        tool_use("gradcheck", script="train.py"),  # 3 directions per iteration: the gate needs them (G006)
        tool_use("finish", outcome="fixed", summary="Claiming the fix before making it."),
        tool_use(
            "edit_file", path="train.py", old_text="requires_grad=(s != STEPS)", new_text="requires_grad=True"
        ),
        tool_use("gradcheck", script="train.py"),  # 3 directions per iteration: the gate needs them (G006)
        tool_use("instrument", script="train.py"),
        tool_use("run_script", script="train.py"),
        tool_use("finish", outcome="fixed", summary="The final state buffer lacked requires_grad=True."),
    )
    agent = Agent(client, AgentConfig(), tmp_path, tools=tools, system=SYSTEM)
    agent.run("train.py does not learn; fix it")
    results = [
        json.loads(b["content"]) if not b["is_error"] else b["content"]
        for m in agent.messages[2::2]
        for b in m["content"]
    ]
    assert results[1]["passed"] is False and results[1]["signature"] == "zero"
    assert "refused" in results[2]  # finishing early: the gate says what is missing and the session goes on
    assert results[4]["passed"] is True and results[4]["harness_id"] == results[1]["harness_id"]
    assert agent.finished is not None and agent.finished["outcome"] == "fixed", results[-3:]
    assert not client.replies


def test_an_api_error_in_chat_is_shown_and_the_next_input_retries(tmp_path):
    transport = ReplayTransport("overloaded.json", "end_turn.json")
    inputs, console = iter(["try again", ""]), _console()
    summary = chat(
        tmp_path,
        real_client(transport),
        AgentConfig(),
        console=console,
        task="go",
        read_input=lambda: next(inputs),
        ask=None,
        tools=TOOLS,
        system=SYSTEM,
    )
    assert "API error" in console.file.getvalue() and "Overloaded" in console.file.getvalue()
    assert summary["answer"] == "3 squared is 9." and summary["stop"] == "ended by user"
    assert [b["text"] for b in transport.bodies()[1]["messages"][0]["content"]] == ["go", "try again"]


@pytest.mark.warp
def test_a_chat_sessions_runs_fork_from_one_warm_worker(tmp_path):
    (tmp_path / "train.py").write_text("for i in range(3):\n    print(f'iter {i} loss {1.0 / (i + 1)}')\n",
                                       encoding="utf-8")
    client = ScriptedClient(
        tool_use("run_script", script="train.py"),
        tool_use("run_script", script="train.py"),
        text("Both runs are done."),
    )
    inputs = iter([""])
    summary = chat(tmp_path, client, AgentConfig(), console=_console(), task="run train.py twice",
                   read_input=lambda: next(inputs), ask=None, tools=load_tools(), system=SYSTEM)
    results = [json.loads(r["messages"][-1]["content"][0]["content"]) for r in client.requests[1:3]]
    assert [r["ok"] for r in results] == [True, True]
    assert [p["value"] for p in results[0]["loss_points"]] == pytest.approx([1.0, 0.5, 1 / 3])
    assert summary["warm_runs"] == 2  # both runs went through the session's worker, none booted a process
