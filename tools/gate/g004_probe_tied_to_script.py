"""G004 probe-tied-to-script. `check(ev, c)`: why probe check `c` is localization evidence (None: `c` is no
probe check)."""

from __future__ import annotations

from .evidence import Check, Evidence
from .rule import Rule


def check(ev: Evidence, c: Check) -> str | None:
    # warpgrad makes no probe-vs-update comparison yet, so every probe check is localization (the evidence's
    # judgement of its kind says so).
    return f"localization evidence ({c.kind_why})" if c.kind == "probe" else None


RULE = Rule(
    id="G004", name="probe-tied-to-script",
    summary="A probe's check counts only when its grad() was compared, at the same parameters, with the gradient "
            "the script's update applies.",
    refuses="a probe check as proof (its grad() was never compared with the script's update)",
    why="A probe whose loss() matched an edited print line counted as the objective while its grad() was never "
        "compared with what the script's optimizer consumes.",
    satisfied_by="Nothing yet: warpgrad makes no probe-vs-update comparison, so a probe check is localization "
                 "evidence; check the workflow itself (gradcheck with the workflow's script and arguments).",
    call="gradcheck(script, args) with the workflow's script and arguments",
    check=check,
)
