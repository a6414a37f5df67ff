"""G005 nonzero-pass. `check(ev, c)`: why passing check `c` measured nothing (None: it measured something)."""

from __future__ import annotations

from .evidence import Check, Evidence, all_zero
from .rule import Rule


def check(ev: Evidence, c: Check) -> str | None:
    if all_zero(c.v):
        return "it found a zero objective, zero AD and zero FD (nothing was measured)"
    return None


RULE = Rule(
    id="G005", name="nonzero-pass",
    summary="A check that found a zero objective, zero AD and zero FD is not a pass.",
    refuses="an all-zero check (objective, AD and FD zero) as a pass",
    why="All-zero numbers agree trivially: nothing depended on the parameters (a stale or disconnected read).",
    satisfied_by="A check where the objective, AD or FD is nonzero.",
    call="gradcheck of the workflow with its parameters connected to the objective (fix the disconnection first)",
    check=check,
)
