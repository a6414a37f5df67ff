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


def compact(value: Any, *, list_cap: int = LIST_CAP, str_cap: int = STR_CAP, hint: bool = True) -> Any:
    """`value` (plain JSON data) with repeats collapsed, lists capped and strings cut, each with a count.

    `hint=False`: a capped list's marker is the bare count (the caller says once how to get the rest)."""
    if isinstance(value, dict):
        # None means "absent" in every result model: dropping it loses nothing and halves a launch record.
        return {k: compact(v, list_cap=list_cap, str_cap=str_cap, hint=hint) for k, v in value.items()
                if v is not None}
    if isinstance(value, str):
        return value if len(value) <= str_cap else value[:str_cap] + f"... [{len(value) - str_cap} characters cut]"
    if not isinstance(value, list):
        return value
    if all(not isinstance(v, dict | list) for v in value):
        # Numbers and names (a shape, a trajectory): order is their meaning, so they are capped, not grouped.
        if len(value) <= 2 * list_cap:
            return [compact(v, list_cap=list_cap, str_cap=str_cap, hint=hint) for v in value]
        return [*value[:list_cap], f"... {len(value) - list_cap - 1} more ...", value[-1]]
    out: list[Any] = []
    groups = collapse(value)
    for item, count, span in groups[:list_cap]:
        small = compact(item, list_cap=list_cap, str_cap=str_cap, hint=hint)
        out.append({"repeated": count, **span, "item": small} if count > 1 else small)
    if len(groups) > list_cap:
        rest = sum(c for _, c, _ in groups[list_cap:])
        out.append({"more": rest, "note": f"{rest} more items not shown ({FULL_HINT})"} if hint else {"more": rest})
    return out


def compact_json(model: BaseModel, budget: int | None = None) -> str:
    """The record as compact JSON; with a `budget`, caps tighten until it fits (then a hard cut, marked)."""
    data = model.model_dump(mode="json")
    text = ""
    for list_cap, str_cap in TIGHTER:
        text = json.dumps(compact(data, list_cap=list_cap, str_cap=str_cap), separators=(",", ":"))
        if budget is None or len(text) <= budget:
            return text
    return fit(text, budget or len(text))


TIGHTER = ((LIST_CAP, STR_CAP), (6, 300), (3, 160), (1, 80))
"""Caps tried in turn until a record fits; strings are never cut below 80 characters (an enum value stays whole)."""
OMITTED = "_omitted"
"""The key naming the top-level fields a fitted record left out (no pydantic field can start with `_`)."""


def _size(data: Any) -> int:
    return len(json.dumps(data, separators=(",", ":"), default=str))


def fit_structured(data: dict[str, Any], budget: int) -> dict[str, Any]:
    """A result record (plain JSON data) within `budget` characters of JSON, still a JSON object of its shape.

    The structured twin of `fit`: MCP structured content is read by programs and, by some hosts, by the model,
    so it is held to the tool's budget like the text. A record that fits is returned unchanged. Otherwise
    `compact` with caps tightening in turn (repeats collapsed with a count, lists capped with a count, long
    strings cut with a count; `_omitted` says so once); if even the tightest caps do not fit, whole top-level
    fields are left out from the last declared backwards (result models declare the verdict first and the raw
    material last), containers before scalars, named under `_omitted` with their sizes, and put back first
    declared first where they fit once later ones are gone.
    `relax_schema` makes the output schema accept every shape this returns.
    """
    if _size(data) <= budget:
        return data
    note = {"note": f"fitted to {budget} characters: repeats collapsed, lists capped and strings cut, with "
                    f"counts; {FULL_HINT} or read the result's resource link"}
    out: dict[str, Any] = data
    for list_cap, str_cap in TIGHTER:
        out = {**compact(data, list_cap=list_cap, str_cap=str_cap, hint=False), OMITTED: note}
        if _size(out) <= budget:
            return out
    order = list(out)
    omitted: dict[str, int] = {}
    for containers_only in (True, False):
        for key in reversed(order):
            if _size(out) <= budget:
                break
            if key == OMITTED or key not in out or (containers_only and not isinstance(out[key], dict | list)):
                continue
            omitted[key] = _size(out.pop(key))
            out[OMITTED] = {**note, "fields": omitted}
    # A field dropped early may fit back once later ones are gone: put back what fits, first declared first.
    for key in [k for k in order if k in omitted]:
        trial = {**out, key: compact(data[key], list_cap=1, str_cap=80, hint=False)}
        rest = {k: v for k, v in omitted.items() if k != key}
        trial[OMITTED] = {**note, "fields": rest} if rest else note
        if _size(trial) <= budget:
            out, omitted = trial, rest
    return {k: out[k] for k in [*order, OMITTED] if k in out}


FITTED_ITEM = {
    "description": "A fitted list's stand-in: {repeated, item} for a run of identical items, {more, note} for "
                   "items not shown, or '... N more ...' in a capped list of numbers.",
    "type": ["object", "string"],
}


NAMED = frozenset({"properties", "$defs", "definitions", "patternProperties"})


def relax_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """An output schema that every `fit_structured` record of it validates against (a new dict).

    Numbers accept null (a NaN or infinite gradient is serialized as null), no property is required (a fitted
    record drops absent values and may leave out whole fields), and every list item may be a fitted stand-in.
    """

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        # Under `properties`, `$defs` and `patternProperties` the keys are names, not keywords: a field called
        # "required" or "type" is walked as the schema it maps to.
        out = {k: ({n: walk(sub) for n, sub in v.items()} if k in NAMED and isinstance(v, dict) else walk(v))
               for k, v in node.items() if k != "required"}
        kind = out.get("type")
        if kind in ("number", "integer"):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and {"number", "integer"} & set(kind) and "null" not in kind:
            out["type"] = [*kind, "null"]
        if kind == "array" or (isinstance(kind, list) and "array" in kind):
            if isinstance(out.get("items"), dict):
                out["items"] = {"anyOf": [out["items"], FITTED_ITEM]}
            if isinstance(out.get("prefixItems"), list):
                out["prefixItems"] = [{"anyOf": [p, FITTED_ITEM]} for p in out["prefixItems"]]
            # A capped list keeps head, marker and tail, so its length is no longer the declared one.
            out.pop("minItems", None)
            out.pop("maxItems", None)
        return out

    return walk(schema)


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
