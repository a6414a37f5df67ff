"""The agent loop driven by a scripted model (no API): tool errors, limits, trajectory, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, Field
from scripted import ScriptedClient, message, text, tool_use, tool_uses

from warpgrad.agent.context import cost_of, price_of, tool_params
from warpgrad.agent.loop import Agent, AgentConfig, Events, LimitsExceeded
from warpgrad.agent.trajectory import Trajectory, messages_of, read_events, totals_of
from warpgrad.tools.registry import ToolError, ToolSpec


class SquareArgs(BaseModel):
    n: int = Field(gt=0, description="A positive integer.")


class SquareResult(BaseModel):
    square: int


class FinishArgs(BaseModel):
    outcome: str = Field(description="fixed | blocked")


class FinishResult(BaseModel):
    outcome: str
    accepted: bool


def _finish(args: FinishArgs, workspace: Path) -> FinishResult:
    if args.outcome == "fixed" and not (workspace / "evidence.txt").exists():
        raise ToolError("finish refused: no passing gradcheck after the patch; run gradcheck again")
    return FinishResult(outcome=args.outcome, accepted=True)


def _crash(args: SquareArgs, workspace: Path) -> SquareResult:
    raise RuntimeError("worker died")


class WriteArgs(BaseModel):
    path: str = Field(description="Workspace-relative path.")
    content: str = Field(description="New file content.")


class WriteResult(BaseModel):
    path: str


def _write(args: WriteArgs, workspace: Path) -> WriteResult:
    (workspace / args.path).write_text(args.content, encoding="utf-8")
    return WriteResult(path=args.path)


TOOLS = {
    "square": ToolSpec(
        "square", "Square n.", SquareArgs, SquareResult, lambda a, w: SquareResult(square=a.n**2)
    ),
    "crash": ToolSpec("crash", "Always crashes.", SquareArgs, SquareResult, _crash),
    "edit_file": ToolSpec("edit_file", "Write a file.", WriteArgs, WriteResult, _write, read_only=False,
                          confirm=True),
    "finish": ToolSpec("finish", "End the session.", FinishArgs, FinishResult, _finish),
}


def make_agent(
    tmp_path: Path, *replies, events: Events | None = None, **config
) -> tuple[Agent, ScriptedClient]:
    client = ScriptedClient(*replies)
    agent = Agent(
        client, AgentConfig(**config), tmp_path, tools=TOOLS, system="You fix gradients.", events=events
    )
    return agent, client


def test_invalid_tool_args_reach_the_model_as_is_error_and_the_loop_continues(tmp_path):
    agent, client = make_agent(tmp_path, tool_use("square", n=-1), tool_use("square", n=3), text("9 it is"))
    assert agent.run("square 3") == "9 it is"
    bad, good = agent.messages[2]["content"][0], agent.messages[4]["content"][0]
    assert bad["is_error"] and "greater than 0" in bad["content"]
    assert not good["is_error"] and json.loads(good["content"]) == {"square": 9}
    assert client.requests[1]["messages"][-1]["content"][0]["is_error"] is True


def test_tool_error_unknown_tool_and_a_crash_all_become_is_error_results(tmp_path):
    agent, _ = make_agent(
        tmp_path,
        tool_uses(("nope", {}), ("crash", {"n": 1}), ("finish", {"outcome": "fixed"})),
        text("giving up"),
    )
    assert agent.run("go") == "giving up"
    results = agent.messages[2]["content"]
    assert [r["is_error"] for r in results] == [True, True, True]
    assert "unknown tool 'nope'" in results[0]["content"]
    assert "RuntimeError: worker died" in results[1]["content"]
    assert "finish refused" in results[2]["content"]
    assert agent.finished is None


def test_a_refused_finish_lets_the_model_continue_and_an_accepted_one_ends_the_session(tmp_path):
    def gather_evidence(request):
        (tmp_path / "evidence.txt").write_text("ok", encoding="utf-8")
        return tool_use("finish", outcome="fixed")

    agent, client = make_agent(
        tmp_path, tool_use("finish", outcome="fixed"), gather_evidence, text("never sent")
    )
    out = agent.run("fix it")
    assert json.loads(out) == {"outcome": "fixed", "accepted": True}
    assert agent.finished == {"outcome": "fixed", "accepted": True}
    assert client.replies and len(client.requests) == 2  # the loop stopped at the accepted finish
    assert "finish refused" in client.requests[1]["messages"][-1]["content"][0]["content"]
    assert read_events(agent.trajectory.path)[-1]["reason"] == "finished"


def test_the_step_limit_ends_the_session_with_limits_exceeded(tmp_path):
    agent, client = make_agent(tmp_path, *[tool_use("square", n=2) for _ in range(5)], step_limit=3)
    with pytest.raises(LimitsExceeded, match="step limit"):
        agent.run("loop forever")
    assert agent.totals["steps"] == 3 and len(client.requests) == 3
    end = read_events(agent.trajectory.path)[-1]
    assert end["type"] == "end" and "step limit" in end["reason"]


def test_the_cost_limit_counts_cache_tokens_at_their_own_prices(tmp_path):
    expensive = message(
        {"type": "tool_use", "id": "t1", "name": "square", "input": {"n": 2}},
        input_tokens=10,
        output_tokens=0,
        cache_creation_input_tokens=200_000,
    )
    agent, _ = make_agent(tmp_path, expensive, text("unreachable"), model="claude-sonnet-4-6", cost_limit=0.5)
    with pytest.raises(LimitsExceeded, match="cost limit"):
        agent.run("go")
    # 200k cache writes at 1.25 x $3/MTok = $0.75, over the $0.50 limit after the first call.
    assert agent.totals["cost"] == pytest.approx(0.75 + 10 * 3 / 1e6)
    assert agent.totals["cache_creation_input_tokens"] == 200_000


def test_the_time_limit_ends_the_session(tmp_path):
    agent, _ = make_agent(tmp_path, tool_use("square", n=2), time_limit=0.0)
    with pytest.raises(LimitsExceeded, match="time limit"):
        agent.run("go")


def test_cache_reads_cost_a_tenth_of_input_and_unknown_models_are_priced_high():
    assert cost_of("claude-sonnet-4-6", {"cache_read_input_tokens": 1_000_000}) == pytest.approx(0.3)
    assert price_of("claude-haiku-4-5") == (1.0, 5.0)
    assert price_of("claude-opus-4-1") == (15.0, 75.0)
    assert price_of("claude-opus-4-6") == (5.0, 25.0)
    assert price_of("someone-elses-model") == (15.0, 75.0)


def test_requests_mark_the_last_tool_and_the_newest_message_as_cache_breakpoints(tmp_path):
    agent, client = make_agent(tmp_path, tool_use("square", n=2), text("4"))
    agent.run("go")
    tools = client.requests[0]["tools"]
    assert [t.get("cache_control") for t in tools] == [None, None, None, {"type": "ephemeral"}]
    assert client.requests[1]["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    # Only the request copy is marked: stored history has no breakpoints piling up.
    assert all("cache_control" not in b for m in agent.messages for b in m["content"])
    assert tool_params({}) == []


def test_declined_edits_are_not_applied_and_the_model_hears_why(tmp_path):
    class Decline(Events):
        def confirm(self, spec, call):
            return "Keep the original loss."

    agent, _ = make_agent(
        tmp_path, tool_use("edit_file", path="a.py", content="x"), text("ok"), events=Decline()
    )
    agent.run("edit")
    result = agent.messages[2]["content"][0]
    assert (
        result["is_error"]
        and "declined" in result["content"]
        and "Keep the original loss." in result["content"]
    )
    assert not (tmp_path / "a.py").exists()
    call = next(e for e in read_events(agent.trajectory.path) if e["type"] == "tool_call")
    assert call["declined"] is True


def test_the_trajectory_is_written_after_every_step_and_never_holds_the_api_key(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    seen = []

    def check_file(request):
        seen.append(len(read_events(agent.trajectory.path)))
        return text("done") if len(seen) > 1 else tool_use("square", n=4)

    agent, _ = make_agent(tmp_path, check_file, check_file)
    # A tool that leaks the key into its output must not leak it into the record.
    agent.tools["square"] = ToolSpec(
        "square",
        "Square n.",
        SquareArgs,
        SquareResult,
        lambda a, w: (_ for _ in ()).throw(ToolError("env: sk-ant-test-0123456789")),
    )
    agent.run("go")
    assert seen[1] > seen[0]  # the tool call and its result were on disk before the next model call
    raw = agent.trajectory.path.read_text(encoding="utf-8")
    assert "sk-ant-test-0123456789" not in raw and "[REDACTED]" in raw
    assert agent.trajectory.path.parent.parent == tmp_path / ".warpgrad" / "sessions"


def test_a_follow_up_after_a_finished_turn_continues_the_same_conversation(tmp_path):
    agent, client = make_agent(tmp_path, text("first"), tool_use("square", n=5), text("25"))
    assert agent.run("hello") == "first"
    assert agent.run("now square 5") == "25"
    roles = [m["role"] for m in client.requests[-1]["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]


def test_resume_rebuilds_the_conversation_and_answers_tool_calls_cut_off_by_a_crash(tmp_path):
    traj = Trajectory.new(tmp_path)
    traj.append({"type": "message", "role": "user", "content": [{"type": "text", "text": "go"}]})
    traj.append(
        {
            "type": "message",
            "role": "assistant",
            "usage": {"input_tokens": 10, "output_tokens": 5},
            "cost": 0.25,
            "content": [{"type": "tool_use", "id": "t9", "name": "square", "input": {"n": 2}}],
        }
    )
    with traj.path.open("a", encoding="utf-8") as f:
        f.write('{"type": "message", "role": "us')  # torn line: the process died mid-write
    events = read_events(traj.path)
    messages = messages_of(events)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[-1]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "t9",
        "is_error": True,
        "content": "The session stopped before this tool ran; call it again if you still need it.",
    }
    totals = totals_of(events)
    assert totals["steps"] == 1 and totals["cost"] == 0.25
    client = ScriptedClient(text("resumed"))
    agent = Agent(
        client,
        AgentConfig(),
        tmp_path,
        tools=TOOLS,
        system="s",
        trajectory=traj,
        messages=messages,
        totals=totals,
    )
    assert agent.run("carry on") == "resumed"
    sent = client.requests[0]["messages"]
    assert sent[-1]["content"][-1]["text"] == "carry on" and len(sent) == 3
    assert agent.totals["steps"] == 2
    assert [e["type"] for e in read_events(traj.path)][-1] == "end"  # appended past the torn line


def test_a_reply_cut_at_max_tokens_does_not_run_its_tool_call_and_the_loop_asks_again(tmp_path):
    cut = message(
        {"type": "tool_use", "id": "t_cut", "name": "edit_file", "input": {"path": "a.py"}},
        stop_reason="max_tokens",
    )
    agent, client = make_agent(tmp_path, cut, text("shorter now"))
    assert agent.run("go") == "shorter now"
    result = agent.messages[2]["content"][0]
    assert result["tool_use_id"] == "t_cut" and result["is_error"] and "max_tokens" in result["content"]
    assert not (tmp_path / "a.py").exists() and len(client.requests) == 2


def test_the_system_prompt_is_the_rendered_skill_in_one_cached_block_and_references_are_read_on_demand(
    tmp_path,
):
    from warpgrad.agent import prompt
    from warpgrad.agent.context import render_skill_for

    client = ScriptedClient(
        tool_use("read_reference", name="quick-checks"), tool_use("read_reference", name="x"), text("ok")
    )
    agent = Agent(client, AgentConfig(references="tool"), tmp_path)
    agent.run("hi")
    request = client.requests[0]
    assert request["system"] == [
        {"type": "text", "text": render_skill_for(agent.tools), "cache_control": {"type": "ephemeral"}}
    ]
    assert [t["name"] for t in request["tools"]] == list(agent.tools) and "read_reference" in agent.tools
    found, missing = agent.messages[2]["content"][0], agent.messages[4]["content"][0]
    # A reference is read whole: its answer is the document itself, not a record to parse.
    assert not found["is_error"] and found["content"] == prompt.read_reference("quick-checks.md")
    assert missing["is_error"] and "quick-checks.md" in missing["content"]  # the error lists what exists

    inline = Agent(ScriptedClient(), AgentConfig(references="inline"), tmp_path)
    assert "read_reference" not in inline.tools
    assert all(prompt.read_reference(n) in inline.system[0]["text"] for n in prompt.reference_names())
