"""G002 no-current-failure. `check(ev)`: every conclusive failing check on the files as they are now."""

from __future__ import annotations

from .evidence import Evidence, short
from .rule import Rule


def check(ev: Evidence) -> list[str]:
    """Conclusive failing checks on the files as they are now that no later check explains."""
    out = []
    for f in ev.checks:
        if f.v.passed is not False or not ev.current(f.rec):
            continue
        explainer = next((c for c in ev.checks if c.seq > f.seq and f.seq in c.v.supersedes and c.real_pass()
                          and c.full_objective() and ev.current(c.rec) and c.files == f.files), None)
        if explainer is not None and f.unreliable():
            continue
        hint = ""
        if explainer is not None:
            hint = (f"; check {explainer.seq} claims to supersede it but the engine did not mark the failing check "
                    "unreliable")
        elif f.unreliable():
            hint = (f"; the engine marked it unreliable ({f.unreliable()}) but no later passing check of the "
                    "full objective on these files supersedes it")
        out.append(RULE.refusal(
            f"the check at record {f.seq} (harness {short(f.v.harness_id)}, iterations "
            f"{f.v.covered_iterations()}) FAILED on the files as they are now{hint}: a failing check on the current "
            "files outweighs any pass; find out why it fails (or fix it with edit_file) and call gradcheck again"))
    return out


RULE = Rule(
    id="G002", name="no-current-failure",
    summary="No outcome that claims correct gradients stands while a check on the current files fails.",
    refuses='a "correct" outcome while a check on the current files fails',
    why="An older pass with another harness or iteration outweighed the latest failing check.",
    satisfied_by="Every conclusive check on the files as they are now passes, or a later check explains the "
                 "failure: the failing check is marked unreliable by the engine (`nondeterministic`, or "
                 "`unreliable_reason`) and a later passing check of the full objective on the same files names it "
                 "in `supersedes`.",
    call="gradcheck of the workflow once what fails is fixed (edit_file, then gradcheck)",
    check=check,
)
