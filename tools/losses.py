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

from .bounded_regex import Budget, RegexTimeout, capped_lines, compile_pattern, finditer, search

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
# `name = 1.5`, `name: 1.5`, `name 1.5` after a separator: the quantities a progress line reports.
_NAMED = compile_pattern(rf"(?:^|[\s,|;(\[])([A-Za-z][A-Za-z0-9_.]*)\s*(?:[:=]\s*|\s)({_NUM})(?![\w.])")
# Quantities that are not an objective: hyper-parameters, clocks, counters, gradient sizes.
_NOT_OBJECTIVE = compile_pattern(r"(?:^|_)(?:lr|learning|rate|dt|time|elapsed|sec|ms|grad|norm|iter(?:ation)?|it|"
                                 r"step|epoch|episode|round|frame|i|n|count|seed|eta|wall)(?:_|$)", regex.IGNORECASE)
# A quantity counts as the progress the script reports when this many iteration lines name it.
MIN_PROGRESS_LINES = 3


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


def parse_progress(text: str) -> list[LossPoint]:
    """`parse_losses`, else the one quantity a script reports on its progress lines under a name of its own
    (`iter 3 | misfit 0.12`, `step 5: distance=1.2e-3`).

    Many scripts name their objective for what it measures, not "loss". A name counts when at least
    MIN_PROGRESS_LINES lines that carry an iteration number report it, and it is not a hyper-parameter, a clock,
    a counter or a gradient size; of several, one whose value moves (a value restated unchanged on every line is a
    setting or a count), then the one most lines name, then the first on its line. None
    qualifies: no points (a guess at the objective is worse than none: the gate compares runs by it).
    """
    points = parse_losses(text)
    if points:
        return points
    budget = Budget()
    rows: list[tuple[int, int, dict[str, float]]] = []  # (line number, iteration, name -> value)
    order: dict[str, int] = {}
    try:
        for n, line in capped_lines(text):
            it = search(_ITER, line, budget) or search(_LEAD, line, budget)
            if it is None:
                continue
            named: dict[str, float] = {}
            for m in finditer(_NAMED, line, budget):
                name = m.group(1).lower()
                if search(_NOT_OBJECTIVE, name, budget) or name in named:
                    continue
                try:
                    named[name] = float(m.group(2))
                except ValueError:
                    continue
                order.setdefault(name, len(order))
            if named:
                rows.append((n, int(it.group(1)), named))
    except RegexTimeout:
        return []
    counts: dict[str, int] = {}
    for _, _, named in rows:
        for name in named:
            counts[name] = counts.get(name, 0) + 1
    eligible = [name for name, c in counts.items() if c >= MIN_PROGRESS_LINES]
    if not eligible:
        return []
    # A name whose value never changes from line to line is a setting or a count the line restates ("error over 4
    # gusts = 291.7", "batch 32 | misfit 0.4"), not the progress: it ranks after every name whose value moves.
    values: dict[str, set[float]] = {}
    for _, _, named in rows:
        for name, v in named.items():
            values.setdefault(name, set()).add(v)
    best = min(eligible, key=lambda name: (len(values[name]) == 1, -counts[name], order[name]))
    return [LossPoint(iteration=it, value=named[best], line=n) for n, it, named in rows if best in named]


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
