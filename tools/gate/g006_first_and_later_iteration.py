"""G006 first-and-later-iteration. `check(checks, call)`: the passing checks of the workflow cover iteration 0
and a later iteration, each with `MIN_DIRECTIONS` resolved agreeing directions."""

from __future__ import annotations

from .evidence import Check
from .rule import Rule

MIN_DIRECTIONS = 3  # resolved agreeing directions per checked iteration


def check(checks: list[Check], call: str) -> list[str]:
    """The iterations first (a check that never reached a later iteration says so plainly), then their strength."""
    return coverage_missing(checks) or strength_missing(checks, call)


def coverage_missing(checks: list[Check]) -> list[str]:
    covered = sorted(set().union(*(c.v.covered_iterations() for c in checks)))
    if 0 in covered and any(i > 0 for i in covered):
        return []
    have = ", ".join(map(str, covered))
    return [RULE.refusal(
        f"passing checks at the first training iteration and at a later one: the passing checks on these files "
        f"cover iteration(s) {have} only; run gradcheck at "
        f"{'iteration 0' if 0 not in covered else 'a later iteration (e.g. --iteration 2)'}")]


def strength(c: Check) -> dict[int, int]:
    """Iteration -> resolved agreeing directions, for the iterations the check passed. Records from before
    `per_iteration` show only their lead iteration's directions."""
    if c.v.per_iteration:
        return {p.iteration: p.agreeing_directions for p in c.v.per_iteration if p.passed is True}
    if c.v.passed is True and c.v.directions:
        return {c.v.iteration if c.v.iteration is not None else 0: sum(d.agrees() for d in c.v.directions)}
    return {}


def strength_missing(checks: list[Check], call: str) -> list[str]:
    """Resolved agreement in MIN_DIRECTIONS directions at iteration 0 and at a later iteration."""
    best: dict[int, int] = {}
    for c in checks:
        for it, n in strength(c).items():
            best[it] = max(best.get(it, 0), n)
    first = best.get(0, 0)
    later = max((n for it, n in best.items() if it > 0), default=0)
    if first >= MIN_DIRECTIONS and later >= MIN_DIRECTIONS:
        return []
    shown = ", ".join(f"iteration {it}: {n}" for it, n in sorted(best.items())) or "no passing iteration with directions"
    return [RULE.refusal(
        f"resolved agreement in {MIN_DIRECTIONS}+ directions at iteration 0 and at a later iteration of the "
        f"workflow: the passing checks show {shown} agreeing direction(s); call {call}")]


RULE = Rule(
    id="G006", name="first-and-later-iteration",
    summary=f"gradients_correct and fixed need resolved agreement in at least {MIN_DIRECTIONS} directions at the "
            "first training iteration and at a later one, on the workflow.",
    refuses=f"fewer than {MIN_DIRECTIONS} agreeing directions at iteration 0 or at a later iteration",
    why="A check at iteration 0 (where a stale or accumulated gradient is invisible) plus one direction at a later "
        "iteration was accepted for a broken program.",
    satisfied_by=f"Passing checks of the workflow whose per-iteration results show {MIN_DIRECTIONS}+ agreeing "
                 "directions at iteration 0 and at some iteration > 0 (gradcheck's default does both).",
    call="gradcheck(script, args) with the workflow's script and arguments without iteration= (it checks iteration 0 "
         "and a later one; when a direction stays unresolved it adds directions)",
    check=check,
)
