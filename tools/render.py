"""One-screen answers of the tools whose record is too big or too nested for the generic compaction.

Each renderer takes the tool's result model and returns plain text that leads with the line that matters;
the numbers come from the result and nothing else. Typed with `Any` where the model lives in the tool's
own module (which imports this one for its `@tool(render=...)`).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from .budget import FULL_HINT, collapse, times

if TYPE_CHECKING:
    from .diagnose import DiagnoseResult

TOP_HYPOTHESES = 3
READ_BUDGET = 40_000
"""A file window or a reference is read whole: the model chose its size (`max_lines`), and a cut copy of
source misleads more than it saves."""


def squeeze(text: str, cap: int = 240) -> str:
    """`text` with runs of identical comma-separated parts written once with a count, cut at `cap`."""
    parts = text.split(", ")
    out: list[str] = []
    for p in parts:
        if out and re.sub(r" ×\d+$", "", out[-1]) == p:
            n = int(m.group(1)) + 1 if (m := re.search(r" ×(\d+)$", out[-1])) else 2
            out[-1] = f"{p} ×{n}"
        else:
            out.append(p)
    s = ", ".join(out)
    return s if len(s) <= cap else s[: cap - 1] + "…"


def _g(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g}"


def read_file_text(r: Any) -> str:
    """A file window as its numbered lines with a one-line header (the model asked for exactly these)."""
    more = f"; continue with start_line={r.next_start_line}" if r.truncated else ""
    return f"{r.path} lines {r.start_line}-{r.end_line} of {r.total_lines}{more}\n{r.text}"


def _evidence(res: DiagnoseResult) -> list[str]:
    gc = res.gradcheck
    if gc is None:
        return []
    if not gc.ok:
        return [f"FD check: no check made: {squeeze(gc.reason, 400)}"]
    lines = [f"FD check, iteration {gc.iteration}, {gc.evaluations} evaluations: objective "
             f"{squeeze(gc.objective, 160)} = {_g(gc.objective_value)}; gradient {squeeze(gc.gradient, 120)}"]
    rows = [json.dumps({"scope": c.scope, "ad": _g(c.ad), "fd": _g(c.fd), "band": _g(c.band),
                        "ratio": _g(c.ratio), "agree": c.agree}) for c in gc.directions]
    for row, n, _ in collapse(rows):
        c = json.loads(row)
        lines.append(f"  {c['scope']}: AD {c['ad']}  FD {c['fd']}  band {c['band']}  AD/FD {c['ratio']}  "
                     f"{'agree' if c['agree'] else 'DISAGREE'}{times(n)}")
    if gc.reason:
        lines.append(f"  {squeeze(gc.reason, 300)}")
    return lines


def _hypotheses(res: DiagnoseResult) -> list[str]:
    lines: list[str] = []
    shown: set[str] = set()
    for h in res.hypotheses[:TOP_HYPOTHESES]:
        where = f" at {h.file}:{h.line}" if h.file and h.line else ""
        lines.append(f"{h.rank}. {h.title}{where} (score {h.score:.2f}" + (f", {h.reference}" if h.reference else "")
                     + ")")
        for e in h.evidence[:2]:
            lines.append(f"   {e.source}: {squeeze(e.detail, 300)}")
        if h.next_check:
            lines.append(f"   fix: {squeeze(h.next_check, 300)}")
        if h.ready_fix is not None:
            call = h.ready_fix.call_text()
            lines.append(f"   ready fix (one call): {call}" if call not in shown else "   ready fix: the one above")
            if h.ready_fix.leaves and call not in shown:
                lines.append(f"   partial: it does not touch {squeeze('; '.join(h.ready_fix.leaves), 300)}")
            shown.add(call)
    if len(res.hypotheses) > TOP_HYPOTHESES:
        lines.append(f"({len(res.hypotheses) - TOP_HYPOTHESES} lower-ranked hypotheses not shown)")
    return lines


def _next_call(res: DiagnoseResult) -> str:
    """The one call to make next."""
    fix = next((h.ready_fix for h in res.hypotheses[:TOP_HYPOTHESES] if h.ready_fix is not None), None)
    if fix is not None and fix.leaves:  # the edit is one of two repairs: the check after it alone would fail
        return (f"{fix.call_text()}; it is only part of the repair: also fix {squeeze('; '.join(fix.leaves), 300)} "
                f"(hypotheses above), then gradcheck {{\"script\": \"{res.script}\"}}")
    if fix is not None:
        return f"{fix.call_text()}, then gradcheck {{\"script\": \"{res.script}\"}}"
    if res.blocked:
        return "make the script run (the error above), then diagnose again"
    if res.gradients_wrong:
        return f"fix the top hypothesis, then gradcheck {{\"script\": \"{res.script}\"}}"
    return squeeze(res.next_steps[0], 300) if res.next_steps else "none: nothing points at a gradient bug"


def diagnose_text(res: DiagnoseResult) -> str:
    """The diagnosis in one screen: headline, FD evidence per direction, top hypotheses with their fix, next call."""
    lines = [f"diagnose {res.script}: {squeeze(res.summary, 400)}"]
    if res.blocked:
        lines.append(f"blocked: {squeeze(res.blocked, 800)}")
    lines += _evidence(res)
    if res.hypotheses:
        lines.append("hypotheses (most likely first):")
        lines += _hypotheses(res)
    if res.ruled_out:
        lines.append(f"ruled out: {len(res.ruled_out)} causes (" + "; ".join(
            squeeze(x.split(":")[0], 60) for x in res.ruled_out[:6]) + (")" if len(res.ruled_out) <= 6 else "; …)"))
    lines.append(f"next: {_next_call(res)}")
    lines.append(f"({FULL_HINT}: tape, tracker, rules, run)")
    return "\n".join(lines)
