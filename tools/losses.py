"""Read a loss trajectory out of what a training script prints.

Scripts print their progress in many shapes (`iter 3 loss 0.12`, `Iteration 3: loss=1.2e-3`,
`step 5 | loss: 0.5`, `[10/100] loss 0.3`, `epoch 1, cost 2.0`). A line counts when it names a
loss-like quantity followed by a number; the iteration is the integer after an iteration-like word,
or the first integer on the line, or the line's position.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Annotated, Any

from pydantic import BaseModel, WithJsonSchema

# A float that may be NaN/inf in Python: JSON carries those as null, so the schema must say so, or a strict
# client (an MCP client validating the result) rejects the whole result of the run that shows the divergence.
JsonFloat = Annotated[float, WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "null"}],
                                             "description": "null when the value is NaN or infinite"})]

_NUM = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf|NaN|Inf|INF)"
_LOSS = re.compile(rf"\b(?:loss|objective|cost|error|mse|l2)\b\s*(?:\([^)]*\))?\s*[:=]?\s*\[?\s*({_NUM})", re.IGNORECASE)
_ITER = re.compile(r"\b(?:iter(?:ation)?|it|step|epoch|episode|round|frame|opt(?:imization)?\s*step|i)\b\s*[:=#]?\s*\[?(\d+)",
                   re.IGNORECASE)
_LEAD = re.compile(r"^\s*\[?(\d+)(?:\s*/\s*\d+)?\]?[\s:,|]")


class LossPoint(BaseModel):
    iteration: int
    value: JsonFloat
    line: int


def parse_losses(text: str) -> list[LossPoint]:
    points: list[LossPoint] = []
    for n, line in enumerate(text.splitlines()):
        m = _LOSS.search(line)
        if not m:
            continue
        try:
            value = float(m.group(1))
        except ValueError:
            continue
        it = _ITER.search(line[: m.start()]) or _ITER.search(line)
        lead = _LEAD.match(line)
        if it:
            iteration = int(it.group(1))
        elif lead:
            iteration = int(lead.group(1))
        else:
            iteration = len(points)
        points.append(LossPoint(iteration=iteration, value=value, line=n + 1))
    return points


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
