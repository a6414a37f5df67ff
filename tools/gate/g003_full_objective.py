"""G003 full-objective. `check(ev, c)`: why check `c` measured only part of the objective (None: it measured the
whole)."""

from __future__ import annotations

from .evidence import Check, Evidence
from .rule import Rule


def check(ev: Evidence, c: Check) -> str | None:
    if c.kind != "probe" and not c.full_objective():
        return f"partial evidence ({c.kind_why})"
    return None


RULE = Rule(
    id="G003", name="full-objective",
    summary="A check of a partial objective (a named variable, a sub-array, an intermediate, an undeclared probe) "
            "never satisfies gradients_correct or fixed.",
    refuses="a check of a named variable, a sub-array or an intermediate as proof",
    why="A check that the per-element array's gradient is right says nothing about the mean the script optimizes.",
    satisfied_by="A check with objective_kind 'script', or 'probe_declared' that passes G004.",
    call="gradcheck(script, args) with the workflow's script and arguments without objective=",
    check=check,
)
