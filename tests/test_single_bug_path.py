"""How many calls the skill's method takes on a single-bug program, driven by a scripted model.

SKILL.md promises that a right fix takes four calls (`diagnose`, the edit, `gradcheck` with the same harness,
`finish`, which runs the tracker and the workflow rerun itself), plus reading the lines `diagnose` cites. This
test plays that path with the real tools against a real broken Warp program. The scripted model does
not know where the bug is: it reads the file and line from `diagnose`'s top hypothesis and patches
only what those lines show, so the count holds only while `diagnose` points at the cause.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from programs import write_program
from scripted import ScriptedClient, tool_use

from warpgrad.agent import prompt
from warpgrad.agent.loop import Agent, AgentConfig
from warpgrad.tools.registry import load_tools

# SKILL.md's four calls for a right fix, plus one read of the cited lines.
CALL_BUDGET = 5
BUG, FIX = "requires_grad=(s != STEPS)", "requires_grad=True"


def tool_results(request: dict[str, Any]) -> list[str]:
    """The texts of the tool results the model was just sent (each tool's one-screen answer)."""
    return [b["content"] for b in request["messages"][-1]["content"] if b.get("type") == "tool_result"]


def read_what_diagnose_cites(request: dict[str, Any]):
    (diagnosis,) = tool_results(request)
    assert "gradients are WRONG (zero" in diagnosis.splitlines()[0], diagnosis
    top = re.search(r"^1\. .* at (\S+):(\d+) \(score", diagnosis, flags=re.MULTILINE)
    assert top, diagnosis
    line = int(top.group(2))
    return tool_use("read_file", path=top.group(1), start_line=max(1, line - 10), max_lines=21)


def patch_what_was_read(request: dict[str, Any]):
    (window,) = tool_results(request)
    assert BUG in window, f"the cited lines do not show the bug:\n{window}"
    return tool_use("edit_file", path=window.split(" lines ")[0], old_text=BUG, new_text=FIX)


@pytest.mark.warp
@pytest.mark.slow
def test_a_single_bug_case_takes_four_calls_and_a_read_along_the_method(tmp_path):
    method = prompt.render_skill().split("## Method")[1].split("## Failure signatures")[0]
    assert "A right fix takes four calls" in " ".join(method.split())
    write_program(tmp_path, "no_requires_grad")  # one bug: the final state buffer has no gradient
    client = ScriptedClient(
        tool_use("diagnose", script="train.py"),
        read_what_diagnose_cites,
        patch_what_was_read,
        tool_use("gradcheck", script="train.py"),  # the same arguments as diagnose's check: same harness
        tool_use(
            "finish", outcome="fixed", summary="The last state buffer was allocated without a gradient."
        ),
    )
    agent = Agent(client, AgentConfig(), tmp_path, tools=load_tools(), system=prompt.render_skill())
    agent.run("train.py trains but its loss never improves; fix it")

    calls = [
        b for m in agent.messages if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"
    ]
    results = [
        b
        for m in agent.messages
        if m["role"] == "user"
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    errors = [r["content"] for r in results if r["is_error"]]
    assert errors == [], errors
    assert agent.finished is not None and agent.finished["outcome"] == "fixed", agent.finished
    assert not client.replies
    assert [c["name"] for c in calls] == [
        "diagnose", "read_file", "edit_file", "gradcheck", "finish"
    ]  # fmt: skip
    assert len(calls) <= CALL_BUDGET
    recheck = json.loads(results[3]["content"])  # gradcheck's answer is its compacted record
    assert recheck["passed"] is True and recheck["signature"] == "correct"
    assert re.search(
        r"requires_grad=True\) for s in range", (tmp_path / "train.py").read_text(encoding="utf-8")
    )
