"""A right fix goes through in four calls over a real MCP stdio session (issue 23): diagnose (its run and its
failing check are the before-evidence) -> edit_file -> gradcheck -> finish (which runs the tracker and the
workflow's rerun itself). The client counts its calls; `undo` is listed as a tool."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from programs import write_program

# (variant, the buggy text, the right fix): each fix leaves the forward as it was.
FIXES = {
    "no_requires_grad": ("requires_grad=(s != STEPS)", "requires_grad=True"),
    "pingpong": ("            a, b = b, a\n", "            a, b = b, wp.zeros(N, dtype=float, requires_grad=True)\n"),
}


@pytest.mark.warp
@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(FIXES))
def test_a_right_fix_passes_the_gate_in_exactly_four_mcp_calls(tmp_path: Path, variant: str):
    write_program(tmp_path, variant)
    old, new = FIXES[variant]
    params = StdioServerParameters(command=str(Path(sys.executable).parent / "warpgrad"),
                                   args=["mcp", "--workspace", str(tmp_path)], env=dict(os.environ), cwd=str(tmp_path))
    calls: list[str] = []

    async def go():
        async with Client(params, read_timeout_seconds=900) as client:
            tools = {t.name for t in (await client.list_tools()).tools}

            async def call(name: str, args: dict):
                calls.append(name)
                return await client.call_tool(name, args)

            diag = await call("diagnose", {"script": "train.py"})
            edit = await call("edit_file", {"path": "train.py", "old_text": old, "new_text": new,
                                            "reason": "the right fix"})
            check = await call("gradcheck", {"script": "train.py"})
            done = await call("finish", {"outcome": "fixed", "summary": f"the {variant} bug, fixed at its source"})
            return tools, diag, edit, check, done

    tools, diag, edit, check, done = anyio.run(go)
    assert "undo" in tools
    for res in (diag, edit, check):
        assert not res.is_error, res.content[0].text
    assert diag.structured_content["gradients_wrong"] is True, diag.structured_content["summary"]
    assert check.structured_content["passed"] is True, check.structured_content["reason"]
    assert not done.is_error, done.content[0].text
    assert calls == ["diagnose", "edit_file", "gradcheck", "finish"]
    out = done.structured_content
    assert out["outcome"] == "fixed" and len(out["gathered"]) == 2
    assert {"failing_check", "passing_check", "patch", "tracker", "run_before", "run_after"} <= set(out["evidence"])
    assert "unchanged" in out["report_markdown"]  # the objective at iteration 0, before -> after
