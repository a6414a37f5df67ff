"""Read a loss trajectory out of what a training script prints.

Scripts print their progress in many shapes (`iter 3 loss 0.12`, `Iteration 3: loss=1.2e-3`,
`step 5 | loss: 0.5`, `[10/100] loss 0.3`, `epoch 1, cost 2.0`). A line counts when it names a
loss-like quantity followed by a number; the iteration is the integer after an iteration-like word,
or the first integer on the line, or the line's position.
"""

from __future__ import annotations

import itertools
import math
from typing import Annotated, Any

import regex
from pydantic import BaseModel, WithJsonSchema

from .bounded_regex import Budget, RegexTimeout, capped_lines, compile_pattern, search

# A float that may be NaN/inf in Python: JSON carries those as null, so the schema must say so, or a strict
# client (an MCP client validating the result) rejects the whole result of the run that shows the divergence.
JsonFloat = Annotated[float, WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "null"}],
                                             "description": "null when the value is NaN or infinite"})]

_NUM = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf|NaN|Inf|INF)"
# No two repeats of the same characters touch (`\s*` then an optional token then `\s*` backtracks cubically on
# a line of spaces); each optional token carries its own trailing `\s*` instead. The engine's timeout is the
# backstop for what this misses.
_LOSS = compile_pattern(rf"\b(?:loss|objective|cost|error|mse|l2)\b\s*(?:\([^)]*\)\s*)?(?:[:=]\s*)?(?:\[\s*)?({_NUM})",
                        regex.IGNORECASE)
_ITER = compile_pattern(r"\b(?:iter(?:ation)?|it|step|epoch|episode|round|frame|opt(?:imization)?\s*step|i)\b\s*"
                        r"(?:[:=#]\s*)?\[?(\d+)", regex.IGNORECASE)
_LEAD = compile_pattern(r"^\s*\[?(\d+)(?:\s*/\s*\d+)?\]?[\s:,|]")


class LossPoint(BaseModel):
    iteration: int
    value: JsonFloat
    line: int


def parse_losses(text: str) -> list[LossPoint]:
    """The (iteration, loss) points of the lines of `text` that name a loss-like quantity and a number.

    The text is the script's: lines are capped and every match is bounded in time (`bounded_regex`). A line
    the patterns cannot read in time is skipped; past the whole text's budget the rest is not read.
    """
    points: list[LossPoint] = []
    budget = Budget()
    for n, line in capped_lines(text):
        try:
            point = _point(line, n, budget, len(points))
        except RegexTimeout:
            if budget.expired():
                break
            continue
        if point is not None:
            points.append(point)
    return points


def _point(line: str, n: int, budget: Budget, index: int) -> LossPoint | None:
    m = search(_LOSS, line, budget)
    if not m:
        return None
    try:
        value = float(m.group(1))
    except ValueError:
        return None
    it = search(_ITER, line, budget, 0, m.start()) or search(_ITER, line, budget)
    lead = search(_LEAD, line, budget)
    if it:
        iteration = int(it.group(1))
    elif lead:
        iteration = int(lead.group(1))
    else:
        iteration = index
    return LossPoint(iteration=iteration, value=value, line=n)


def summarize(points: list[LossPoint]) -> dict[str, Any]:
    """Shape of a trajectory: first/last/best, non-finite, and whether it improved, diverged or stalled."""
    if not points:
        return {"n": 0}
    vals = [p.value for p in points]
    finite = [v for v in vals if math.isfinite(v)]
    # Mixed value types (counts, losses, the trend's name); the callers copy it into their result models.
    out: dict[str, Any] = {"n": len(vals), "first": vals[0], "last": vals[-1], "nonfinite": len(vals) - len(finite)}
    if finite:
        out["best"] = min(finite)
    if len(finite) >= 2 and math.isfinite(vals[-1]):
        first, last = finite[0], vals[-1]
        rel = (last - first) / max(abs(first), 1e-30)
        if rel < -0.05:
            trend = "improving"
        elif rel > 0.5 or last > 10 * abs(first):
            trend = "diverging"
        else:
            trend = "flat"
        ups = sum(1 for a, b in itertools.pairwise(finite) if b > a)
        if trend != "diverging" and len(finite) >= 4 and ups >= 0.4 * (len(finite) - 1):
            trend = "oscillating"
        out["trend"] = trend
    elif out["nonfinite"]:
        out["trend"] = "nonfinite"
    return out
