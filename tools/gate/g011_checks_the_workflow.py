"""G011 checks-the-workflow. `check(ev, c, constants=True)`: how check `c` departs from the workflow (None: it
checked the workflow). `constants=False` (objective_changed: the model declared a changed constant) compares the
script and arguments only."""

from __future__ import annotations

from .evidence import Check, Evidence
from .rule import Rule


def check(ev: Evidence, c: Check, *, constants: bool = True) -> str | None:
    away = ev.departures(c, constants=constants)
    if away:
        return "localization evidence, not a check of the workflow: " + "; ".join(away)
    return None


RULE = Rule(
    id="G011", name="checks-the-workflow",
    summary="Only checks of the workflow (its script, arguments and module constants, fixed by the first run or "
            "diagnose) satisfy gradients_correct or fixed; anything else is localization evidence.",
    refuses="a check of another script, other arguments or other module constants than the workflow's",
    why="A wrapper that ran the program with T=1, a --small run, or a module constant edited from 60 to 1 passed "
        "where the program the user runs is broken.",
    satisfied_by="A check with the workflow's script and arguments on files whose module constants equal the "
                 "workflow's (finish(outcome='objective_changed', summary=why) when a constant changed on purpose).",
    call="gradcheck(script, args) with the workflow's script and arguments on the workflow's constants, or "
         "finish(outcome='objective_changed', summary=why) when a constant changed on purpose",
    check=check,
)
