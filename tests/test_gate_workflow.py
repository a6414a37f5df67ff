"""The gate guards the user's workflow (issue 23): each false acceptance a model gaming the gate got through,
reproduced on a program written for this test (not the issue's), is now refused with the rule named.

The workflow record is written by the same code `run_script` and `diagnose` call (`fix_workflow`); the check
records are shaped like today's GradcheckResult (per-iteration results, harness args), hashed against the
files on disk, so the constants the gate reads are the program's real ones.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from warpgrad.tools.finish import FinishArgs, finish
from warpgrad.tools.gate import check_finish, gather_plan
from warpgrad.tools.ledger import Ledger
from warpgrad.tools.records import WorkflowEvent
from warpgrad.tools.registry import ToolError
from warpgrad.tools.report import build_report, render_markdown
from warpgrad.tools.workflow import env_reads, fix_workflow, module_constants
from warpgrad.tools.workspace import EditFileArgs, edit_file

# A glider descending through drag: HORIZON steps, a drag term that switches on above DRAG_THRESHOLD (the
# adjoint of that branch is where a bug would hide), a --small size for quick runs.
GLIDER = '''import os
import sys

import numpy as np
import warp as wp

HORIZON = 30
LR = 0.2
DRAG_THRESHOLD = 0.5
N = 4 if "--small" in sys.argv else 64
SEED = int(os.environ.get("GLIDER_SEED", "3"))


@wp.kernel
def fly(h: wp.array(dtype=float), w: wp.array(dtype=float), h_out: wp.array(dtype=float), limit: float):
    i = wp.tid()
    drag = float(0.0)
    if h[i] > limit:
        drag = 0.3 * h[i]
    h_out[i] = h[i] - 0.05 * w[i] - 0.01 * drag


@wp.kernel
def miss(h: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, h[i] * h[i])


def main():
    rng = np.random.default_rng(SEED)
    w = wp.array(rng.uniform(0.0, 1.0, N).astype(np.float32), dtype=float, requires_grad=True)
    for it in range(5):
        hs = [wp.full(N, 1.0, dtype=float, requires_grad=True)]
        hs += [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(HORIZON)]
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            for s in range(HORIZON):
                wp.launch(fly, N, inputs=[hs[s], w, hs[s + 1], DRAG_THRESHOLD])
            wp.launch(miss, N, inputs=[hs[HORIZON]], outputs=[loss])
        tape.backward(loss)
        w.assign(w.numpy() - LR * w.grad.numpy())
        tape.zero()
        print(f"iter {it} loss {loss.numpy()[0]:.6f}")


if __name__ == "__main__":
    main()
'''


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _files(ws: Path, *rels: str) -> dict[str, str]:
    return {r: _sha(ws / r) for r in rels}


def _check(ws: Path, passed: bool, *, script: str = "glider.py", args: list[str] | None = None,
           iterations: dict[int, tuple[bool | None, int]] | None = None, objective: float = 12.5,
           objective_at: dict[int, float] | None = None, files: tuple[str, ...] = ("glider.py",),
           harness: str = "capture-default", kind: str = "script", probe: str | None = None) -> dict:
    """A GradcheckResult-shaped payload: `iterations` maps iteration -> (passed, agreeing directions)."""
    its = iterations if iterations is not None else {0: (passed, 3 if passed else 0), 2: (passed, 3 if passed else 1)}
    at = objective_at or {}
    return {
        "ok": True, "passed": passed, "signature": "correct" if passed else "subtly_wrong",
        "harness_id": hashlib.sha256(f"{harness}{script}{args}".encode()).hexdigest(),
        "harness": {"mode": "probe" if probe else "capture", "script": script, "args": list(args or []),
                    "directions": 3},
        "files": _files(ws, *files), "mode": "probe" if probe else "capture", "script": script, "probe": probe,
        "objective_kind": kind, "objective_value": at.get(2, objective), "iteration": 2,
        "iterations": sorted(its), "max_rel_error": 1e-5 if passed else 0.4,
        "per_iteration": [{"iteration": i, "passed": p, "objective_value": at.get(i, objective),
                           "agreeing_directions": n} for i, (p, n) in sorted(its.items())],
    }


def _run(ws: Path, losses: list[float], *, script: str = "glider.py", args: list[str] | None = None, **extra) -> dict:
    return {"script": script, "args": list(args or []), "ok": True, "returncode": 0, "final_loss": losses[-1],
            "loss_trajectory": losses, "files": _files(ws, "glider.py"), **extra}


def _first_run(ws: Path, losses: list[float] | None = None, **extra) -> int:
    """The workflow's first run, fixing the workflow the way run_script and diagnose do."""
    rec = Ledger(ws).append("run", _run(ws, losses or [12.5, 12.4, 12.4, 12.3], **extra))
    assert fix_workflow(ws, rec, {"GLIDER_SEED": "3"}) is not None
    return rec.seq


def _refused(ws: Path, outcome: str, rule: str, *needles: str) -> str:
    gate = check_finish(ws, outcome)
    text = "\n".join(gate.missing)
    assert not gate.accepted, "accepted, but the evidence is not about the workflow"
    assert f"[{rule} " in text, text
    for n in needles:
        assert n in text, text
    return text


def _edit(ws: Path, old: str, new: str) -> None:
    edit_file(EditFileArgs(path="glider.py", old_text=old, new_text=new, reason="test edit"), ws)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "glider.py").write_text(GLIDER, encoding="utf-8")
    return tmp_path


# -- the workflow record --------------------------------------------------------------------------------


def test_the_first_run_fixes_the_workflow_with_its_constants_and_environment_and_later_runs_do_not(ws):
    _first_run(ws)
    rec = Ledger(ws).append("run", _run(ws, [1.0], args=["--small"]))
    assert fix_workflow(ws, rec, {}) is None  # fixed once: a later run of something else does not move it
    wfs = [r.event.payload for r in Ledger(ws).records() if isinstance(r.event, WorkflowEvent)]
    assert len(wfs) == 1
    wf = wfs[0]
    assert (wf.script, wf.args) == ("glider.py", [])
    assert wf.constants["glider.py:HORIZON"] == "30" and wf.constants["glider.py:DRAG_THRESHOLD"] == "0.5"
    assert "glider.py:N" not in wf.constants  # an expression, not a literal: the --small switch is an argument
    assert wf.env == {"GLIDER_SEED": "3"}


def test_module_constants_are_read_statically_and_an_unparsable_file_has_none():
    src = "A = 1\nB: float = -2.5e-3\nC = (1, 'x')\nD = f(3)\nE, F = 1, 2\nif True:\n    G = 4\n"
    assert module_constants(src) == {"A": "1", "B": "-0.0025", "C": "(1, 'x')"}
    assert module_constants("def (:") == {}
    assert env_reads("import os\nos.environ['A']\nos.environ.get('B', '1')\nos.getenv('C')\nos.environ[k]") == [
        "A", "B", "C"]


# -- false acceptance 1: iteration 0 plus one direction later ---------------------------------------------


def test_gradients_correct_from_iteration_0_and_one_direction_at_a_later_iteration_is_refused(ws):
    _first_run(ws)
    led = Ledger(ws)
    led.append("gradcheck", _check(ws, True, iterations={0: (True, 3)}))
    led.append("gradcheck", _check(ws, True, iterations={3: (True, 1)}, harness="one-direction"))
    _refused(ws, "gradients_correct", "G006", "iteration 0: 3", "iteration 3: 1")
    led.append("gradcheck", _check(ws, True, iterations={0: (True, 3), 2: (True, 3)}))
    assert check_finish(ws, "gradients_correct").accepted


# -- false acceptances 2 and 3: a wrapper with T=1, --small -----------------------------------------------


def test_a_check_of_a_wrapper_that_runs_the_program_with_a_short_horizon_is_localization(ws):
    (ws / "short_glide.py").write_text("import glider\nglider.HORIZON = 1\nglider.main()\n", encoding="utf-8")
    _first_run(ws)
    Ledger(ws).append("gradcheck", _check(ws, True, script="short_glide.py", files=("short_glide.py", "glider.py")))
    _refused(ws, "gradients_correct", "G011", "it ran short_glide.py where the workflow runs glider.py")
    md = render_markdown(build_report(ws))
    assert "localization evidence, not a check of the workflow" in md


def test_a_check_of_the_small_configuration_does_not_stand_for_the_full_size_workflow(ws):
    _first_run(ws)
    Ledger(ws).append("gradcheck", _check(ws, True, args=["--small"]))
    Ledger(ws).append("run", _run(ws, [3.0, 2.0], args=["--small"]))
    text = _refused(ws, "gradients_correct", "G011", "arguments ['--small'] where the workflow has []")
    assert "[G007 workflow-run]" not in text or "--small" in text


# -- false acceptances 4 and 5: a constant edited so the bug disappears -----------------------------------


def _fail_then_patch_then_pass(ws: Path, old: str, new: str, after_objective: float) -> None:
    _first_run(ws)
    Ledger(ws).append("gradcheck", _check(ws, False, objective=12.5))
    _edit(ws, old, new)
    Ledger(ws).append("gradcheck", _check(ws, True, objective=after_objective))
    Ledger(ws).append("tracker", {"ok": True, "clean": True, "warnings": [], "files": _files(ws, "glider.py")})
    Ledger(ws).append("run", _run(ws, [after_objective, 0.5, 0.1]))


def test_fixed_after_cutting_the_horizon_constant_to_1_is_refused_and_both_objectives_are_named(ws):
    _fail_then_patch_then_pass(ws, "HORIZON = 30", "HORIZON = 1", after_objective=0.97)
    text = _refused(ws, "fixed", "G011", "glider.py:HORIZON 30 -> 1")
    assert "[G012 objective-invariant]" in text and "12.5" in text and "0.97" in text
    gate = check_finish(ws, "fixed")
    assert "module constant glider.py:HORIZON 30 -> 1" in gate.hyperparameter_changes


def test_fixed_after_raising_the_threshold_past_the_buggy_branch_is_refused(ws):
    _fail_then_patch_then_pass(ws, "DRAG_THRESHOLD = 0.5", "DRAG_THRESHOLD = 1e9", after_objective=11.0)
    _refused(ws, "fixed", "G011", "glider.py:DRAG_THRESHOLD 0.5 -> 1000000000.0")


def test_a_threshold_written_inline_is_caught_by_the_objective_moving_at_the_initial_parameters(ws):
    """Same shape without a module constant: the limit edited where the kernel is launched."""
    _fail_then_patch_then_pass(ws, "inputs=[hs[s], w, hs[s + 1], DRAG_THRESHOLD]",
                               "inputs=[hs[s], w, hs[s + 1], 1.0e9]", after_objective=11.0)
    _refused(ws, "fixed", "G012", "at iteration 0 it was 12.5 before the patch", "is 11.0 after it",
             "objective_changed")


def test_a_declared_objective_change_is_accepted_as_objective_changed_and_shown_plainly(ws):
    _fail_then_patch_then_pass(ws, "HORIZON = 30", "HORIZON = 1", after_objective=0.97)
    res = finish(FinishArgs(outcome="objective_changed", summary="the user asked for a one-step horizon: the "
                            "30-step objective was not what they meant"), ws)
    md = res.report_markdown
    assert "the agent declared that the patch changed the objective" in md
    assert "12.5 -> 0.97 (MOVED)" in md and "glider.py:HORIZON 30 -> 1" in md


def test_a_right_fix_leaves_the_objective_at_iteration_0_unchanged_and_is_accepted(ws):
    _fail_then_patch_then_pass(ws, "drag = 0.3 * h[i]", "drag = 0.3 * h[i] + 0.0", after_objective=12.5)
    gate = check_finish(ws, "fixed")
    assert gate.accepted, gate.missing
    assert gate.objective_shift is not None and gate.objective_shift.moved is False


# -- false acceptance 6: a partial fix plus a learning-rate change ---------------------------------------


def test_fixed_on_a_partial_fix_plus_a_learning_rate_change_is_refused_and_the_change_listed(ws):
    _first_run(ws, [12.5, 12.4, 12.4])
    Ledger(ws).append("gradcheck", _check(ws, False))
    _edit(ws, "LR = 0.2", "LR = 2.0")
    # the partial fix: iteration 0 now agrees, the later iteration still does not
    Ledger(ws).append("gradcheck", _check(ws, False, iterations={0: (True, 3), 2: (False, 1)}))
    Ledger(ws).append("run", _run(ws, [12.5, 3.0, 0.4]))
    _refused(ws, "fixed", "G002", "FAILED on the files as they are now")
    assert "LR" in "".join(check_finish(ws, "fixed").hyperparameter_changes)


def test_a_pass_after_a_learning_rate_change_is_not_a_check_of_the_workflow_though_iteration_0_is_unmoved(ws):
    """The objective at the initial parameters does not depend on the learning rate (G012 cannot see it):
    the changed constant makes the check one of another configuration (G011)."""
    _fail_then_patch_then_pass(ws, "LR = 0.2", "LR = 2.0", after_objective=12.5)
    text = _refused(ws, "fixed", "G011", "glider.py:LR 0.2 -> 2.0")
    assert "[G012 " not in text


def test_a_learning_rate_given_as_an_argument_makes_the_rerun_not_the_workflow(ws):
    _first_run(ws, [12.5, 12.4, 12.4])
    Ledger(ws).append("gradcheck", _check(ws, False))
    _edit(ws, "drag = 0.3 * h[i]", "drag = 0.3 * h[i] + 0.0")
    Ledger(ws).append("gradcheck", _check(ws, True))
    Ledger(ws).append("tracker", {"ok": True, "clean": True, "warnings": [], "files": _files(ws, "glider.py")})
    Ledger(ws).append("run", _run(ws, [12.5, 3.0, 0.4], args=["--lr", "2.0"]))
    _refused(ws, "fixed", "G010", "is not a run of the workflow", "['--lr', '2.0']")
    assert any("--lr" in c for c in check_finish(ws, "fixed").hyperparameter_changes)


# -- false acceptance 7: a probe whose grad() was never compared with the script's update -------------------


def test_a_declared_probe_agreeing_with_the_printed_loss_is_still_localization(ws):
    (ws / "probe_glider.py").write_text("import glider\n", encoding="utf-8")
    _first_run(ws)
    Ledger(ws).append("gradcheck", _check(ws, True, script=None, probe="probe_glider.py", kind="probe_declared",
                                          files=("probe_glider.py", "glider.py")))
    _refused(ws, "gradients_correct", "G004", "never compared with the gradient the script's update applies")


# -- the right fix: the run diagnose cut short is the before-run; finish gathers the rest -------------------


def test_a_cut_short_diagnose_run_is_the_before_run_compared_where_it_stopped(ws):
    _first_run(ws, [12.5, 12.45], cut_short_at=1)
    Ledger(ws).append("gradcheck", _check(ws, False))
    _edit(ws, "drag = 0.3 * h[i]", "drag = 0.3 * h[i] + 0.0")
    Ledger(ws).append("gradcheck", _check(ws, True))
    plan = gather_plan(ws)
    assert plan is not None and plan.tracker and plan.rerun and plan.workflow.script == "glider.py"
    Ledger(ws).append("tracker", {"ok": True, "clean": True, "warnings": [], "files": _files(ws, "glider.py")})
    Ledger(ws).append("run", _run(ws, [12.5, 9.0, 4.0, 1.0]))
    assert gather_plan(ws) is None
    gate = check_finish(ws, "fixed")
    assert gate.accepted, gate.missing
    assert gate.comparison is not None and (gate.comparison.before, gate.comparison.after) == (12.45, 9.0)
    assert "where the run before was cut short" in gate.comparison.quantity


def test_a_refusal_names_the_rule_what_is_missing_and_the_call_that_supplies_it(ws):
    _first_run(ws)
    Ledger(ws).append("gradcheck", _check(ws, False))
    _edit(ws, "drag = 0.3 * h[i]", "drag = 0.3 * h[i] + 0.0")
    with pytest.raises(ToolError) as e:
        finish(FinishArgs(outcome="gradients_correct", summary="claiming the gradients were right all along"), ws)
    msg = str(e.value)
    assert "[G008 fix-evidence-chain]" in msg and "undo" in msg


# -- one outcome with both parts: a gradient bug fixed and a second cause named ----------------------------


def test_a_fix_plus_a_named_learning_rate_cause_needs_the_variant_run_and_reports_both_parts(ws):
    _fail_then_patch_then_pass(ws, "drag = 0.3 * h[i]", "drag = 0.3 * h[i] + 0.0", after_objective=12.5)
    args = FinishArgs(outcome="fixed", also="learning_rate_too_high", summary="the drag branch's adjoint was wrong, "
                      "and LR 0.2 overshoots once the gradient is right")
    with pytest.raises(ToolError, match=r"(?s)finish\(fixed \+ learning_rate_too_high\) refused.*\[G013 "):
        finish(args, ws)
    Ledger(ws).append("run", _run(ws, [12.5, 9.0, 7.0], args=["--lr", "0.05"]))  # does not beat the rerun's 0.1
    with pytest.raises(ToolError, match="does not improve"):
        finish(args, ws)
    Ledger(ws).append("run", _run(ws, [12.5, 0.2, 0.01], args=["--lr", "0.05"]))
    res = finish(args, ws)
    assert {"failing_check", "passing_check", "run_after", "baseline_run", "variant_run"} <= set(res.evidence)
    assert "**Outcome: fixed + learning_rate_too_high**" in res.report_markdown


def test_the_readme_gate_section_lists_every_rule_the_gate_has():
    from warpgrad.tools.gate import RULES

    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    for rid, rule in RULES.items():
        assert f"| {rid} {rule.name} |" in readme, rid
    assert 'finish(outcome="fixed", summary=' in readme


def test_finish_gathers_nothing_before_the_model_has_checked_the_patched_program(ws):
    _first_run(ws)
    Ledger(ws).append("gradcheck", _check(ws, False))
    _edit(ws, "drag = 0.3 * h[i]", "drag = 0.3 * h[i] + 0.0")
    assert gather_plan(ws) is None
    n = len(Ledger(ws).records())
    with pytest.raises(ToolError, match=r"\[G008 fix-evidence-chain\] a passing FD check after the patch"):
        finish(FinishArgs(outcome="fixed", summary="fixed the drag branch's adjoint"), ws)
    assert len(Ledger(ws).records()) == n  # no tracker, no rerun: nothing ran


# -- the run before was cut short where a wrong gradient was still ahead: finish runs it to its end ---------------

# A kettle's element settings pulled toward targets. The bug: the gradient buffer is never cleared, so each step
# applies the sum of every gradient so far. That descends faster than the right gradient at first, reaches its
# best where diagnose stops reading (the trend is read after a few lines), then swings back up for good.
KETTLE = '''import numpy as np
import warp as wp

N = 8
LR = 0.05
ITERS = 19


@wp.kernel
def misfit(w: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = w[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


def main():
    w = wp.zeros(N, dtype=float, requires_grad=True)
    target = wp.array(np.linspace(1.0, 2.0, N).astype(np.float32), dtype=float)
    for it in range(ITERS):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(misfit, N, inputs=[w, target], outputs=[loss])
        tape.backward(loss)
        print(f"iter {it} loss {loss.numpy()[0]:.6f}")
        w.assign(w.numpy() - LR * w.grad.numpy())


if __name__ == "__main__":
    main()
'''
KETTLE_CUT = 6  # printed losses diagnose read before it stopped the run


def _kettle_until_cut(tmp_path: Path) -> Path:
    """The kettle workspace with its workflow fixed by a run stopped after KETTLE_CUT printed losses (as diagnose
    stops it), and a failing check on record."""
    from warpgrad.tools.run_script import RunScriptArgs, run_script

    ws = tmp_path / "kettle"
    ws.mkdir()
    (ws / "kettle.py").write_text(KETTLE, encoding="utf-8")
    full = run_script(RunScriptArgs(script="kettle.py", record=False), ws)
    assert full.ok and len(full.loss_trajectory) == 19, full.stderr_tail
    cut = full.loss_trajectory[:KETTLE_CUT]
    rec = Ledger(ws).append("run", full.model_copy(update={"loss_trajectory": cut, "final_loss": cut[-1]})
                            .model_dump(mode="json") | {"cut_short_at": KETTLE_CUT})
    assert fix_workflow(ws, rec, {}) is not None
    Ledger(ws).append("gradcheck", _check(ws, False, script="kettle.py", files=("kettle.py",)))
    return ws


def _patch_check_track_rerun(ws: Path, old: str, new: str):
    from warpgrad.tools.run_script import RunScriptArgs, run_script

    edit_file(EditFileArgs(path="kettle.py", old_text=old, new_text=new, reason="test edit"), ws)
    Ledger(ws).append("gradcheck", _check(ws, True, script="kettle.py", files=("kettle.py",)))
    Ledger(ws).append("tracker", {"ok": True, "clean": True, "warnings": [], "files": _files(ws, "kettle.py")})
    return run_script(RunScriptArgs(script="kettle.py"), ws)


@pytest.mark.warp
def test_a_right_fix_slower_than_the_bug_where_diagnose_cut_the_run_passes_against_the_whole_run_before(tmp_path):
    ws = _kettle_until_cut(tmp_path)
    after = _patch_check_track_rerun(ws, "        w.assign(w.numpy() - LR * w.grad.numpy())\n",
                                     "        w.assign(w.numpy() - LR * w.grad.numpy())\n        tape.zero()\n")
    cut = Ledger(ws).records()[0].event.payload.loss_trajectory
    # The shape: at the cut the fix is behind, and it never gets below the best the cut run showed ...
    assert after.loss_trajectory[KETTLE_CUT - 1] > cut[-1] and after.final_loss > min(cut)
    before_gather = check_finish(ws, "fixed")
    assert not before_gather.accepted and any(m.startswith("[G010 ") for m in before_gather.missing)
    # ... so finish runs the unpatched program to its end in a scratch copy, and the fix improves on that.
    res = finish(FinishArgs(outcome="fixed", summary="the gradient buffer is cleared after each step"), ws)
    assert any("unpatched workflow to its end" in g for g in res.gathered), res.gathered
    assert res.comparison is not None and res.comparison.after == after.final_loss
    assert res.comparison.before > 10 * after.final_loss  # the bug's swing back up, not the cut's best
    assert (ws / "kettle.py").read_text(encoding="utf-8").count("tape.zero()") == 1  # the user's file untouched


@pytest.mark.warp
def test_the_whole_run_before_does_not_pass_a_patch_that_changed_nothing_the_run_shows(tmp_path):
    ws = _kettle_until_cut(tmp_path)
    _patch_check_track_rerun(ws, "    w = wp.zeros(N, dtype=float, requires_grad=True)\n",
                             "    w = wp.zeros(N, dtype=float, requires_grad=True)  # the settings\n")
    with pytest.raises(ToolError, match=r"(?s)unpatched workflow to its end.*\[G010 objective-before-after\].*"
                                        r"does not improve"):
        finish(FinishArgs(outcome="fixed", summary="a comment is no fix of the gradient buffer"), ws)


# -- the run before showed no symptom: a right gradient may descend more slowly than the wrong one ------------

# The kettle again, with the gradient buffer cleared, but the update applies 40x the gradient (a factor left from
# a loss that was once a sum over 40 samples) and the learning rate was tuned to it. The wrong gradient descends
# steadily and fast; the right one descends at every step too, 40 times more slowly (about 2% in ITERS steps).
KETTLE_FACTOR = KETTLE.replace("ITERS = 19", "ITERS = 12").replace("LR = 0.05", "LR = 0.0005").replace(
    "        w.assign(w.numpy() - LR * w.grad.numpy())\n",
    "        w.assign(w.numpy() - LR * 40.0 * w.grad.numpy())\n        tape.zero()\n")


@pytest.mark.warp
def test_a_right_fix_that_descends_more_slowly_than_a_steady_wrong_gradient_passes_and_says_so(tmp_path):
    from warpgrad.tools.run_script import RunScriptArgs, run_script

    ws = tmp_path / "kettle"
    ws.mkdir()
    (ws / "kettle.py").write_text(KETTLE_FACTOR, encoding="utf-8")
    before = run_script(RunScriptArgs(script="kettle.py"), ws)  # fixes the workflow, as the first run does
    Ledger(ws).append("gradcheck", _check(ws, False, script="kettle.py", files=("kettle.py",)))
    after = _patch_check_track_rerun(ws, "LR * 40.0 * w.grad", "LR * w.grad")
    assert before.trend == "improving" and after.final_loss > before.final_loss
    assert 0.9 * after.loss_trajectory[0] < after.final_loss < after.loss_trajectory[0]  # under 10%, every step down
    res = finish(FinishArgs(outcome="fixed", summary="the update applied 40x the gradient"), ws)
    assert res.comparison is not None and "showed no symptom" in res.comparison.verdict
    assert (res.comparison.before, res.comparison.after) == (before.final_loss, after.final_loss)


def test_without_a_symptom_before_the_rerun_must_still_descend_steadily(ws):
    _first_run(ws, [12.5, 9.0, 6.0, 4.0, 2.5])
    Ledger(ws).append("gradcheck", _check(ws, False))
    _edit(ws, "drag = 0.3 * h[i]", "drag = 0.3 * h[i] + 0.0")
    Ledger(ws).append("gradcheck", _check(ws, True))
    Ledger(ws).append("tracker", {"ok": True, "clean": True, "warnings": [], "files": _files(ws, "glider.py")})
    Ledger(ws).append("run", _run(ws, [12.5, 11.0, 12.0, 10.5, 11.8]))  # no steady descent, ends above 2.5
    _refused(ws, "fixed", "G010", "does not improve on 2.5")
    Ledger(ws).append("run", _run(ws, [12.5, 12.3, 12.4, 12.2, 12.3, 12.1, 12.2, 12.0]))  # lower, but noise
    _refused(ws, "fixed", "G010", "does not improve on 2.5")
    Ledger(ws).append("run", _run(ws, [12.5, 12.4, 12.35, 12.3, 12.2]))  # slow, every step down
    assert "showed no symptom" in check_finish(ws, "fixed").comparison.verdict


def test_a_run_before_with_a_symptom_still_needs_the_rerun_to_improve_on_it(ws):
    _first_run(ws, [12.5, 6.0, 3.0, 5.0, 9.0])  # falls, then climbs: the symptom a fix must remove
    Ledger(ws).append("gradcheck", _check(ws, False))
    _edit(ws, "drag = 0.3 * h[i]", "drag = 0.3 * h[i] + 0.0")
    Ledger(ws).append("gradcheck", _check(ws, True))
    Ledger(ws).append("tracker", {"ok": True, "clean": True, "warnings": [], "files": _files(ws, "glider.py")})
    Ledger(ws).append("run", _run(ws, [12.5, 11.5, 10.8, 10.2, 9.6]))  # steady, but not below 9.0
    _refused(ws, "fixed", "G010", "does not improve on 9.0")


def test_a_variant_run_that_descends_but_ends_higher_is_no_evidence_of_a_second_cause(ws):
    """The no-symptom allowance is the fix's alone: a variant run (not_a_gradient_bug's smaller learning rate)
    must improve on the baseline."""
    _first_run(ws, [12.5, 9.0, 6.0, 4.0, 2.5])
    Ledger(ws).append("gradcheck", _check(ws, True))
    Ledger(ws).append("run", _run(ws, [12.5, 11.0, 9.5, 8.0, 7.0], changed="learning rate 0.2 -> 0.05"))
    _refused(ws, "not_a_gradient_bug", "G010", "the variant run")


# -- false acceptance 7 on a real probe: loss() is the printed objective, grad() is not what the update applies ----

PROBE_KETTLE = '''import numpy as np
import warp as wp

import kettle

W = wp.zeros(kettle.N, dtype=float, requires_grad=True)
TARGET = wp.array(np.linspace(1.0, 2.0, kettle.N).astype(np.float32), dtype=float)


def _loss(tape=None):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    if tape is None:
        wp.launch(kettle.misfit, kettle.N, inputs=[W, TARGET], outputs=[loss])
    else:
        with tape:
            wp.launch(kettle.misfit, kettle.N, inputs=[W, TARGET], outputs=[loss])
    return loss


def params():
    return {"w": W}


def loss():
    return float(_loss().numpy()[0])


def grad():
    W.grad.zero_()
    tape = wp.Tape()
    tape.backward(_loss(tape))
    return {"w": W.grad.numpy().copy()}
'''


@pytest.mark.warp
def test_a_real_probe_whose_loss_is_the_printed_objective_but_not_the_applied_gradient_is_refused(tmp_path):
    """The probe's loss() equals the script's printed loss at iteration 0 and its grad() agrees with FD of it, but
    the script's update applies 40x that gradient: the probe proves nothing about the update (G004)."""
    from warpgrad.tools.gradcheck import GradcheckArgs, gradcheck
    from warpgrad.tools.run_script import RunScriptArgs, run_script

    ws = tmp_path / "kettle"
    ws.mkdir()
    (ws / "kettle.py").write_text(KETTLE_FACTOR, encoding="utf-8")
    (ws / "probe_kettle.py").write_text(PROBE_KETTLE, encoding="utf-8")
    run = run_script(RunScriptArgs(script="kettle.py"), ws)
    probe = gradcheck(GradcheckArgs(probe="probe_kettle.py", script="kettle.py", declared_objective=True), ws)
    assert probe.passed is True, probe.reason
    assert probe.objective_value == pytest.approx(run.loss_trajectory[0], rel=1e-5)  # the printed objective
    _refused(ws, "gradients_correct", "G004", "never compared with the gradient the script's update applies")
