"""Is a passing check a pass of the workflow's objective? The rules that judge one check record, in the order a
refusal names them: a probe (G004), a partial objective (G003), not the workflow (G011), all zeros (G005)."""

from __future__ import annotations

from collections.abc import Callable

from . import g003_full_objective, g004_probe_tied_to_script, g005_nonzero_pass, g011_checks_the_workflow
from .evidence import Check, Evidence
from .rule import Rule


def not_a_pass(ev: Evidence, c: Check, *, constants: bool = True) -> tuple[Rule, str] | None:
    """(rule, why) when passing check `c` is no pass of the workflow's objective; None when it is one."""
    judges: list[tuple[Rule, Callable[[], str | None]]] = [
        (g004_probe_tied_to_script.RULE, lambda: g004_probe_tied_to_script.check(ev, c)),
        (g003_full_objective.RULE, lambda: g003_full_objective.check(ev, c)),
        (g011_checks_the_workflow.RULE, lambda: g011_checks_the_workflow.check(ev, c, constants=constants)),
        (g005_nonzero_pass.RULE, lambda: g005_nonzero_pass.check(ev, c)),
    ]
    for rule, judge in judges:  # lazily: G011 reads the files on disk, needless once a cheaper rule refused
        why = judge()
        if why is not None:
            return rule, why
    return None
