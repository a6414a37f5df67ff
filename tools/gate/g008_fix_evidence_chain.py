"""G008 fix-evidence-chain. `check(ev, declared=False)`: a failing check, a patch after it, and a passing check
with the same harness on the patched files as they are now; the chain then carries the rules that judge its
pieces (the pass is a pass of the workflow: G003/G004/G005/G011; its strength: G006; the objective unmoved:
G012, waived when `declared`; after the patch a clean tracker and an improving rerun: G009, G010).
`unmodified_check(ev)`: for the outcomes about the program as it is, a passing check of the unmodified program."""

from __future__ import annotations

from ..ledger import LedgerRecord, disk_hashes
from . import (
    g002_no_current_failure,
    g006_first_and_later_iteration,
    g009_clean_tracker,
    g010_objective_before_after,
    g012_objective_invariant,
)
from .evidence import Check, Evidence, Findings, patch_payload, patched_paths, same_harness, short
from .passes import not_a_pass
from .rule import Rule

CHECK_THE_WORKFLOW = ("gradcheck with the workflow's script and arguments, without --iteration (it checks iteration 0 "
                      "and a later one)")


def check(ev: Evidence, *, declared: bool = False) -> Findings:
    """The best chain from any failing check (the one with the fewest missing pieces), with G002 in front."""
    failing = [c for c in ev.checks if c.v.passed is False]
    if not failing:
        return Findings(missing=[RULE.refusal(
            "a failing FD check (a gradcheck record with ok=true and passed=false): run gradcheck on the program "
            "before patching so the wrong gradient is on record (diagnose makes it)")])
    best: Findings | None = None
    for f in reversed(failing):
        cand = _from_failure(ev, f, ev.patches(), declared)
        if best is None or len(cand.missing) < len(best.missing):
            best = cand
        if not best.missing:
            break
    assert best is not None
    best.missing = g002_no_current_failure.check(ev) + best.missing
    return best


def _from_failure(ev: Evidence, f: Check, patches: list[LedgerRecord], declared: bool) -> Findings:
    out = Findings(evidence={"failing_check": f.seq})
    after_f = [p for p in patches if p.seq > f.seq and patched_paths(p)]
    if not after_f:
        msg = (f"a patch (edit_file or apply_patch) of the user's program recorded after the failing check (record "
               f"{f.seq})")
        if any(p.seq > f.seq for p in patches):
            msg += "; the patches since only changed warpgrad's own diagnostic files (probe, shrunk copy)"
        out.missing.append(RULE.refusal(msg))
        return out
    first_patch = after_f[0]
    hid = f.v.harness_id
    passing = [c for c in ev.checks if c.v.passed is True and c.seq > first_patch.seq]
    same = [c for c in passing if same_harness(f.v, c.v)]
    if not same:
        msg = (f"a passing FD check after the patch with the same harness as the failing check (record {f.seq}, "
               f"harness_id {short(hid)}): rerun gradcheck with the same script or probe, arguments, seed and "
               "iteration (more directions are allowed)")
        if passing:
            msg += (f"; the passing check (record {passing[-1].seq}) used a different harness "
                    f"({short(passing[-1].v.harness_id)}), so it does not compare like with like")
        more = _after_patch(ev, after_f[-1], first_patch, set(), improve=not declared)
        out.missing = [RULE.refusal(msg), *more.missing]
        return out
    best: Findings | None = None
    for a in reversed(same):
        cand = _with_pass(ev, f, a, same, after_f, first_patch, declared)
        cand.evidence = {**out.evidence, **cand.evidence}
        if best is None or len(cand.missing) < len(best.missing):
            best = cand
        if not cand.missing:
            break
    assert best is not None
    return best


def _with_pass(ev: Evidence, f: Check, a: Check, same: list[Check], after_f: list[LedgerRecord],
               first_patch: LedgerRecord, declared: bool) -> Findings:
    """The chain failing check `f` -> the patches before `a` -> passing check `a`, and what it lacks."""
    in_fix = [p for p in after_f if p.seq < a.seq]
    cand = Findings(evidence={"passing_check": a.seq, "patch": in_fix[-1].seq})
    patched = set().union(*(patched_paths(p) for p in in_fix))
    bad = not_a_pass(ev, a, constants=not declared)
    if bad:
        cand.missing.append(bad[0].refusal(
            f"the passing check (record {a.seq}) is not a pass of the workflow's objective: {bad[1]}; call "
            "gradcheck with the workflow's script and arguments"))
    else:
        sound = [c for c in same if ev.current(c.rec) and not not_a_pass(ev, c, constants=not declared)]
        cand.missing += g006_first_and_later_iteration.strength_missing(sound, CHECK_THE_WORKFLOW)
    cand.shift = g012_objective_invariant.objective_shift(f, a)
    if not declared:
        cand.missing += g012_objective_invariant.check(cand.shift)
    cand.missing += _ties_to_patch(ev, f, a, patched)
    more = _after_patch(ev, in_fix[-1], first_patch, patched, improve=not declared)
    cand.missing += more.missing
    cand.evidence.update(more.evidence)
    cand.comparison = more.comparison
    return cand


def _ties_to_patch(ev: Evidence, f: Check, a: Check, patched: set[str]) -> list[str]:
    """The passing check ran the patched files as they are now, and their bytes differ from the failing check's."""
    out = []
    stale = ev.stale(a.rec)
    if not a.files:
        out.append(RULE.refusal(
            f"the passing check (record {a.seq}) lists no files it imported, so it cannot be tied to the program on "
            "disk: rerun gradcheck through the shipped program"))
    elif stale:
        out.append(RULE.refusal(
            f"the passing check (record {a.seq}) is stale: {', '.join(sorted(stale))} changed on disk after it ran; "
            "rerun gradcheck on the files as they are now"))
    if a.files and not (patched & set(a.files)):
        out.append(RULE.refusal(
            f"the passing check (record {a.seq}) never imported a patched file ({', '.join(sorted(patched))}); "
            "verify the patched program itself, not a re-implementation of it"))
    elif a.files and all(a.files[p] == f.files.get(p) for p in patched & set(a.files)):
        out.append(RULE.refusal(
            f"the passing check (record {a.seq}) ran the same bytes of the patched files as the failing check "
            f"(record {f.seq}): the patch was undone or changed nothing, so the pass is noise or a flaky harness, "
            "not a fix"))
    return out


def _after_patch(ev: Evidence, last_patch: LedgerRecord, first_patch: LedgerRecord, patched: set[str], *,
                 improve: bool) -> Findings:
    """The tracker (G009) and the workflow's rerun (G010) after the fix's last patch (`improve=False`:
    objective_changed, where before and after measure different objectives, needs no improvement)."""
    out = g009_clean_tracker.check(ev, last_patch, patched)
    if not improve:
        return out
    rerun = g010_objective_before_after.check(ev, last_patch, first_patch, patched)
    return Findings(missing=out.missing + rerun.missing, evidence={**out.evidence, **rerun.evidence},
                    comparison=rerun.comparison)


def unmodified_check(ev: Evidence) -> tuple[Findings, list[Check]]:
    """The program is as it was before any patch, and passing full-horizon checks of the workflow's objective
    exist on the files as they are now: the findings and those checks (empty when there are none)."""
    originals: dict[str, str | None] = {}
    for r in ev.patches():
        for rel, sha in patch_payload(r).before.items():
            originals.setdefault(rel, sha)
    now = disk_hashes(ev.workspace, list(originals))
    modified = [rel for rel, sha in originals.items() if now[rel] != sha]
    out = Findings()
    if modified:
        out.missing.append(RULE.refusal(
            f"the program is modified ({', '.join(sorted(modified))} differ from their originals): this outcome is "
            "about the unmodified program; undo the patches (warpgrad undo --all) or finish with another outcome"))
    passing = [c for c in ev.checks if c.v.passed is True and c.v.full_horizon]
    current = [c for c in passing if ev.current(c.rec)]
    good = [c for c in current if not not_a_pass(ev, c)]
    if good:
        out.evidence["passing_check"] = good[-1].seq
    elif current:
        c = current[-1]
        bad = not_a_pass(ev, c)
        rule, why = bad if bad else (RULE, "")
        out.missing.append(rule.refusal(
            f"a passing full-horizon FD check of the workflow's objective: the passing check (record {c.seq}) is "
            f"{why}; call gradcheck with the workflow's script and arguments"))
    elif passing:
        c = passing[-1]
        what = "lists no files it imported" if not c.files else (
            f"is stale ({', '.join(sorted(ev.stale(c.rec)))} changed since)")
        out.missing.append(RULE.refusal(
            f"a passing full-horizon FD check on the files as they are now: the passing check (record {c.seq}) "
            f"{what}; rerun gradcheck"))
    else:
        out.missing.append(RULE.refusal(
            "a passing full-horizon FD check (gradcheck over the user's full objective and horizon, ok=true, "
            "passed=true) on the unmodified program"))
    return out, good


RULE = Rule(
    id="G008", name="fix-evidence-chain",
    summary="fixed needs a failing check, a patch after it, and a passing check with the same harness on the "
            "patched files as they are now.",
    refuses="`fixed` without failing check -> patch -> passing check with the same harness",
    why="Before/after with the same harness is the only like-for-like proof that the patch changed the gradient.",
    satisfied_by="gradcheck before the patch (fails; diagnose's check counts) and again after it with the same "
                 "arguments (passes).",
    call="gradcheck(script, args) with the workflow's script and arguments after the patch (before it, diagnose's "
         "failing check counts; a patch is edit_file or apply_patch)",
    check=check,
)
