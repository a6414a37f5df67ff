"""Quick-check rules: static patterns in Warp programs that are known to break gradients.

Each rule lives in its own module named for the pattern and registers itself in `RULES` when imported
below; rules run and are listed in code order. `run_rules(files, root)` is the plain entry point that
`diagnose` uses; the `quick_checks` tool in `tool.py` wraps it for the agent, MCP and CLI.
"""

from . import (  # noqa: F401 - importing registers the rule
    adjoint_assign,  # WG013
    atomic_counter_without_replay,  # WG014
    backward_disabled,  # WG002
    backward_per_step,  # WG004
    component_reassign,  # WG008
    copy_onto_read_array,  # WG006
    dynamic_loop_mutated_local,  # WG009
    grad_read_before_backward,  # WG015
    inplace_mul_div,  # WG007
    missing_requires_grad,  # WG001
    missing_tape_zero,  # WG003
    nonsmooth_at_zero,  # WG010
    piecewise_constant,  # WG012
    ping_pong_rebinding,  # WG005
    ptr_alias,  # WG017
    retain_grad_rewritten,  # WG018
    struct_array_overwrite,  # WG019
    sum_seed_for_mean_objective,  # WG016
    where_overflow,  # WG011
)
from .base import RULES, Finding, Rule
from .engine import CheckReport, ParseError, check_files, collect_files, run_rules

__all__ = [
    "RULES",
    "CheckReport",
    "Finding",
    "ParseError",
    "Rule",
    "check_files",
    "collect_files",
    "run_rules",
]
