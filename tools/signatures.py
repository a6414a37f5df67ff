"""The signatures (the ways a gradient can be wrong) and the table of what each one points at.

`Signature` is the one definition of the names: the FD engine classifies into it, gradcheck reports it,
quick-check rules and eval cases name it, and its values are the strings on the wire (JSON results,
ledger records, `evals.json`, grader metadata). It sits here, in a module that imports nothing of the
package, so every layer (the harness included, through `fd`) can use it.

Each `TABLE` entry names the quick-check rules (WGnnn), tape hazards and tracker kinds that are leading
causes of the signature (the skill's "Failure signatures" table, in data), the reference section, and
what to check next when nothing pins it down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


# The values are the wire format (JSON results, ledger records, evals.json, grader metadata): never rename one.
class Signature(StrEnum):
    """How a gradient compares with finite differences: a row of the signature table."""

    CORRECT = "correct"
    ZERO = "zero"
    NAN_INF = "nan_inf"
    EXACT_FACTOR = "exact_factor"
    SUBTLY_WRONG = "subtly_wrong"
    SPARSE_SUBSET = "sparse_subset"
    GROWS_ACROSS_ITERATIONS = "grows_across_iterations"
    TRUNCATION = "truncation"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class SignatureRow:
    meaning: str
    rules: frozenset[str] = field(default_factory=frozenset)
    hazards: frozenset[str] = field(default_factory=frozenset)
    tracker: frozenset[str] = field(default_factory=frozenset)
    reference: str = ""
    next_check: str = ""


def _row(meaning: str, rules: str = "", hazards: str = "", tracker: str = "", reference: str = "",
         next_check: str = "") -> SignatureRow:
    return SignatureRow(meaning, frozenset(rules.split()), frozenset(hazards.split()), frozenset(tracker.split()),
                        reference, next_check)


TABLE: dict[Signature, SignatureRow] = {
    Signature.ZERO: _row(
        "the gradient is exactly zero",
        rules="WG001 WG002 WG012 WG015", hazards="chain_cut_requires_grad chain_cut_backward_disabled copy_on_tape",
        reference="references/quick-checks.md §2, §3, §9c",
        next_check="find the array without requires_grad or the backward-disabled kernel between the parameters and "
                   "the loss (inspect_tape lists both); if the forward is piecewise constant, zero is right and a "
                   "surrogate gradient is the fix"),
    Signature.GROWS_ACROSS_ITERATIONS: _row(
        "the gradient accumulates across iterations",
        rules="WG003 WG005 WG017", hazards="mutated_before_backward stale_launches",
        reference="references/quick-checks.md §4",
        next_check="zero the gradients (tape.zero() or a new tape) before every backward and rerun gradcheck"),
    Signature.EXACT_FACTOR: _row(
        "the gradient is off by a constant factor",
        rules="WG016 WG018", hazards="recorded_twice retain_grad_rewritten",
        reference="references/quick-checks.md §7",
        next_check="compare the seed of backward with the objective you report (sum vs mean), and look for a launch "
                   "recorded twice onto an array with retain_grad=True"),
    Signature.NAN_INF: _row(
        "the gradient has NaN or inf entries",
        rules="WG010 WG011 WG009", hazards="",
        reference="references/quick-checks.md §9a, §9b, §6b",
        next_check="the NaN origin (first launch whose adjoint turns non-finite) names the kernel; guard sqrt/length/"
                   "normalize/division at zero, and keep both branches of wp.where finite"),
    Signature.SUBTLY_WRONG: _row(
        "the gradient is wrong by a varying amount",
        rules="WG005 WG006 WG007 WG008 WG009 WG013 WG014 WG017 WG019",
        hazards="write_after_read within_kernel_overwrite inplace_update mutated_before_backward copy_on_tape",
        tracker="across_launches within_kernel copy",
        reference="references/quick-checks.md §1, §5, §6; references/custom-gradients.md",
        next_check="bisect the horizon to find the step where AD and FD part, then look for a buffer written after "
                   "an earlier launch read it"),
    Signature.SPARSE_SUBSET: _row(
        "only some elements disagree",
        rules="WG010 WG011 WG012", hazards="",
        reference="references/quick-checks.md §9",
        next_check="check whether a discrete choice (min/max, contact, where) differs at exactly the mismatching "
                   "elements: at a kink FD cannot pick between valid subgradients"),
    Signature.TRUNCATION: _row(
        "several backward calls feed one update: the tape never sees the whole horizon",
        rules="WG004", hazards="",
        reference="references/quick-checks.md §8",
        next_check="record the whole horizon on one tape with total_steps + 1 distinct state buffers and call "
                   "backward once per update"),
    Signature.INCONCLUSIVE: _row(
        "FD cannot judge this objective as it stands",
        rules="WG012 WG011 WG010", hazards="",
        reference="references/verification.md",
        next_check="pin the randomness or reformulate the objective (see the reason), then rerun gradcheck"),
    Signature.CORRECT: _row("the gradient matches FD", reference="references/verification.md"),
}
