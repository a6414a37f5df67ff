"""The finish gate: does the evidence in the ledger say what an outcome claims?

`check_finish(workspace, outcome)` is the one gate every front end calls (the `finish` tool, `warpgrad gate`,
hooks, the eval runner). It reads the ledger (`warpgrad.tools.ledger`, the append-only log) and the files on
disk, and lists what is missing, each item tagged with the rule it comes from and naming the call that
supplies it.

Each rule lives in its own module beside its check, the way a linter's rules do (`g0NN_<name>.py`: the
`Rule` with its id, summary, what it refuses, why, what satisfies it and the one call that supplies what is
missing, and the `check` function); `catalog.RULES` lists them and `catalog.rules_markdown()` writes the
README's table. The gate checks not only that evidence of the right kinds exists in the right order but that
each piece *says* what the outcome claims: a check of a sub-array is not a check of the objective, a check that
found all zeros is not a pass, a run whose loss could not be read proves no improvement, and a failing check
on the files as they are now is not outweighed by an older pass with another harness.
"""

from __future__ import annotations

from .catalog import RULES, rules_markdown
from .compare import objective_improves
from .evidence import Evidence, all_zero, objective_kind
from .g006_first_and_later_iteration import MIN_DIRECTIONS
from .g012_objective_invariant import OBJECTIVE_RTOL, ObjectiveShift, objective_shift
from .gather import GatherPlan, gather_plan, unpatched_run_needed
from .outcomes import (
    CORRECT_CLAIMS,
    OUTCOMES,
    GateResult,
    OtherCause,
    Outcome,
    check_finish,
    hyperparameter_changes,
    localization,
)
from .rule import Rule

__all__ = ["CORRECT_CLAIMS", "MIN_DIRECTIONS", "OBJECTIVE_RTOL", "OUTCOMES", "RULES", "Evidence",
           "GateResult", "GatherPlan", "ObjectiveShift", "OtherCause", "Outcome", "Rule", "all_zero", "check_finish",
           "gather_plan", "hyperparameter_changes", "localization", "objective_improves", "objective_kind",
           "objective_shift", "rules_markdown", "unpatched_run_needed"]
