"""Output budgets: what a tool returns by default fits one screen, and a full record shrinks without losing shape.

A model pays for every character it reads, and the one line that matters gets buried in a 60k-character
dump (sixty identical launches listed one by one). So a tool's default answer is a rendering under its
budget, and the full record stays one argument (`detail="full"`) or one resource read away.

`compact` is the structured middle ground (`--json`): every field is kept, identical list items collapse
into one with a count, long lists keep their head with a count of the rest, and long strings keep their
head with a count of the characters cut. Items that differ only in where they sit (`index`, ids) count as
identical: the collapsed entry keeps the first and names the range.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

SCREEN = 4000
"""Characters of one screen: the default budget of every tool's answer."""
LIST_CAP = 12
STR_CAP = 600
ORDINAL_KEYS = frozenset({"index", "after_launch", "array", "ptr", "rank", "launch"})
"""Keys that only say where an item sits or which object it is: items differing in these alone are repeats."""

Detail = Literal["summary", "full"]
DETAIL_DESCRIPTION = ("'summary' (default): an answer that fits one screen, repeats collapsed; 'full': the whole "
                      "record as JSON.")
FULL_HINT = 'call again with detail="full" for the whole record'


def _strip(item: Any) -> Any:
    """The item with its ordinal keys dropped at every depth (a launch's arrays carry ids of their own)."""
    if isinstance(item, dict):
        return {k: _strip(v) for k, v in item.items() if k not in ORDINAL_KEYS}
    if isinstance(item, list):
        return [_strip(v) for v in item]
    return item


def _identity(item: Any) -> str:
    """The canonical string repeats are grouped by."""
    return json.dumps(_strip(item), sort_keys=True, default=str)


def _span(group: list[Any]) -> dict[str, Any]:
    """The ordinal keys of a collapsed group: first..last of each, so no position is silently lost."""
    out: dict[str, Any] = {}
    if isinstance(group[0], dict):
        for k in ORDINAL_KEYS & group[0].keys():
            vals = [g.get(k) for g in group]
            out[k] = vals[0] if len(set(map(str, vals))) == 1 else f"{vals[0]}..{vals[-1]}"
    return out


def collapse(items: list[Any]) -> list[tuple[Any, int, dict[str, Any]]]:
    """Group identical items (ordinal keys aside) in first-seen order: (first item, count, ordinal span)."""
    groups: dict[str, list[Any]] = {}
    for it in items:
        groups.setdefault(_identity(it), []).append(it)
    return [(g[0], len(g), _span(g) if len(g) > 1 else {}) for g in groups.values()]


def compact(value: Any, *, list_cap: int = LIST_CAP, str_cap: int = STR_CAP) -> Any:
    """`value` (plain JSON data) with repeats collapsed, lists capped and strings cut, each with a count."""
    if isinstance(value, dict):
        # None means "absent" in every result model: dropping it loses nothing and halves a launch record.
        return {k: compact(v, list_cap=list_cap, str_cap=str_cap) for k, v in value.items() if v is not None}
    if isinstance(value, str):
        return value if len(value) <= str_cap else value[:str_cap] + f"... [{len(value) - str_cap} characters cut]"
    if not isinstance(value, list):
        return value
    if all(not isinstance(v, dict | list) for v in value):
        # Numbers and names (a shape, a trajectory): order is their meaning, so they are capped, not grouped.
        if len(value) <= 2 * list_cap:
            return [compact(v, list_cap=list_cap, str_cap=str_cap) for v in value]
        return [*value[:list_cap], f"... {len(value) - list_cap - 1} more ...", value[-1]]
    out: list[Any] = []
    groups = collapse(value)
    for item, count, span in groups[:list_cap]:
        small = compact(item, list_cap=list_cap, str_cap=str_cap)
        out.append({"repeated": count, **span, "item": small} if count > 1 else small)
    if len(groups) > list_cap:
        rest = sum(c for _, c, _ in groups[list_cap:])
        out.append({"more": rest, "note": f"{rest} more items not shown ({FULL_HINT})"})
    return out


def compact_json(model: BaseModel, budget: int | None = None) -> str:
    """The record as compact JSON; with a `budget`, caps tighten until it fits (then a hard cut, marked)."""
    data = model.model_dump(mode="json")
    text = ""
    for list_cap, str_cap in ((LIST_CAP, STR_CAP), (6, 300), (3, 160), (1, 80)):
        text = json.dumps(compact(data, list_cap=list_cap, str_cap=str_cap), separators=(",", ":"))
        if budget is None or len(text) <= budget:
            return text
    return fit(text, budget or len(text))


def fit(text: str, budget: int) -> str:
    """`text` cut to `budget` characters, the cut marked with how much was left out and how to get it."""
    if len(text) <= budget:
        return text
    tail = f"\n... [{{}} characters cut; {FULL_HINT}]"
    keep = max(0, budget - len(tail) - 8)
    return text[:keep] + tail.format(len(text) - keep)


def times(n: int) -> str:
    """' ×n' for a repeat count above one, else ''."""
    return f" ×{n}" if n > 1 else ""


Renderer = Callable[[Any], str]
