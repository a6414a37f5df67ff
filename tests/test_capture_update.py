"""An iteration is one parameter update, and FD perturbs what that update's kernels read (issue 22).

Programs under tests/fixtures/shapes/ written as user code: parameters set from host values every iteration
(written through their numpy view, assigned, logged first), host accumulators, hand seeds. Each test runs
the real gradcheck on one of them; the expected outcome is the program's construction (a correct float64
program, or a named bug in a custom adjoint).
"""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from warpgrad.tools.diagnose import DiagnoseResult, _summary
from warpgrad.tools.gradcheck import HUB_ENV, GradcheckArgs, check

pytestmark = pytest.mark.warp

SHAPES = Path(__file__).parent / "fixtures" / "shapes"


def _check(tmp_path: Path, name: str, *args: str):
    shutil.copy(SHAPES / f"{name}.py", tmp_path / "train.py")
    return check(GradcheckArgs(script="train.py", args=list(args), record=False), tmp_path)


@pytest.mark.parametrize("args", [(), ("--assign",), ("--log-first",), ("--assign", "--log-first")])
def test_a_parameter_written_on_the_host_before_its_use_is_perturbed_after_the_write(tmp_path, args):
    """A host read of the parameter, then a write of this iteration's values (through its numpy view or with
    assign): perturbing at the read puts the perturbation where the write erases it (FD sees nothing)."""
    r = _check(tmp_path, "host_mirror_write", *args)
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.notes)
    assert [p.role for p in r.params] == ["launch:relax:6:1"]  # the first kernel read after the write


@pytest.mark.parametrize("args", [("--bug-half",), ("--assign", "--log-first", "--bug-half")])
def test_a_wrong_adjoint_behind_a_host_written_parameter_is_found(tmp_path, args):
    r = _check(tmp_path, "host_mirror_write", *args)
    assert r.passed is False and r.signature in ("sparse_subset", "subtly_wrong"), (r.signature, r.reason)


def _printed(tmp_path: Path, *args: str) -> dict[int, float]:
    """The loss the script itself prints for each update (a plain run, outside warpgrad)."""
    out = subprocess.run([sys.executable, "train.py", *args], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout
    return {int(ln.split()[1].rstrip(":")): float(ln.split()[-1]) for ln in out.splitlines() if ln.startswith("update")}


def test_frames_summed_into_a_host_accumulator_are_one_update_checked_whole(tmp_path):
    r = _check(tmp_path, "frames_grad_accum")
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.notes)
    assert r.backward_calls == 4  # every frame's backward belongs to the one update
    assert r.objective_value == pytest.approx(_printed(tmp_path)[r.iteration], rel=1e-9)  # the sum, not a frame


def test_frames_that_carry_state_across_tapes_are_truncation_never_correct(tmp_path):
    r = _check(tmp_path, "frames_grad_accum", "--carry")
    assert (r.passed, r.signature) == (False, "truncation"), (r.reason, r.notes)
    assert r.objective_value == pytest.approx(_printed(tmp_path, "--carry")[r.iteration], rel=1e-9)


def test_a_grad_summed_on_the_host_without_zeroing_is_the_sum_the_step_applies(tmp_path):
    """Four frames add into a .grad nobody zeroes between them, and the host sums the four reads: the step
    applies earlier frames again. The tapes' own gradient (the .grad after the last frame) is measured right,
    so truncation is ruled out by that measurement, not by default."""
    r = _check(tmp_path, "frames_grad_accum", "--no-zero")
    assert (r.passed, r.signature) == (False, "subtly_wrong"), (r.signature, r.reason, r.notes)
    assert any("not zeroed between the backward passes" in n for n in r.notes), r.notes
    assert r.tape_gradient_passed is True and "ruled out by measurement" in r.explanation
    headline = _summary(DiagnoseResult(ok=True, script="train.py", gradients_wrong=True, signature=r.signature,
                                       gradcheck=r))
    assert "WRONG" not in headline and "the tape's gradient is right" in headline


@pytest.mark.parametrize("args", [("--adam",), ("--adam", "--no-zero")])
def test_reads_the_update_cannot_be_tied_to_give_no_verdict_with_the_reason(tmp_path, args):
    """Four reads feed one Adam step on the host: the step follows none of them, so which gradient it
    applies is unknown. Never `correct` from one frame's read, never `wrong` from a guess."""
    r = _check(tmp_path, "frames_grad_accum", *args)
    assert (r.passed, r.signature) == (None, "inconclusive"), (r.signature, r.reason)
    assert "applies is not known" in r.reason and "4 host reads" in " ".join(r.notes)


def test_a_hand_seed_of_ones_on_terms_reported_as_their_mean_is_an_exact_factor_at_both_iterations(tmp_path):
    r = _check(tmp_path, "mean_seeded_grads_kwarg")
    assert (r.passed, r.signature, r.factor) == (False, "exact_factor", 48.0), (r.reason, r.explanation)
    assert r.iterations == [0, 1]
    assert "iteration 1 failed (exact_factor)" in r.notes, r.notes  # the second iteration says the same


def test_the_same_terms_seeded_with_one_over_n_are_correct(tmp_path):
    r = _check(tmp_path, "mean_seeded_grads_kwarg", "--mean-seed")
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.notes)


def test_a_stale_read_of_a_right_tape_gradient_says_both_facts(tmp_path):
    """A helper reads (and clears) .grad before backward: the update applies zeros at the first iteration,
    while the tape's own gradient is right. Both are measured, and the headline says both."""
    r = _check(tmp_path, "stale_helper_read")
    assert (r.passed, r.signature, r.iteration) == (False, "zero", 0), (r.reason, r.notes)
    assert r.stale_read and r.tape_gradient_passed is True, r.notes
    headline = _summary(DiagnoseResult(ok=True, script="train.py", gradients_wrong=True, signature=r.signature, gradcheck=r))
    assert "WRONG" not in headline and "the tape's gradient is right" in headline and "stale" in headline


def test_a_stale_read_of_a_wrong_tape_gradient_says_the_tape_is_wrong_too(tmp_path):
    r = _check(tmp_path, "stale_helper_read", "--bug-adjoint")
    assert r.passed is False and r.stale_read, (r.signature, r.notes)
    assert r.tape_gradient_passed is False, r.notes
    headline = _summary(DiagnoseResult(ok=True, script="train.py", gradients_wrong=True, signature=r.signature, gradcheck=r))
    assert "gradients are WRONG" in headline


def test_a_gradient_applied_one_iteration_late_judges_the_tapes_own_gradient(tmp_path):
    r = _check(tmp_path, "lagged_gradient")
    assert r.passed is False and r.stale_read, (r.signature, r.notes)
    assert r.tape_gradient_passed is True, r.notes


def test_no_stale_read_leaves_the_tape_verdict_unset(tmp_path):
    r = _check(tmp_path, "host_mirror_write")
    assert r.passed is True and r.tape_gradient_passed is None


@pytest.mark.slow
def test_a_parameter_read_beside_its_clones_gets_the_same_verdict_roles_and_numbers_in_five_runs(tmp_path, monkeypatch):
    """Same program, same verdict (issue 22, item 1): x0 is cloned and copied on the tape and read with its
    copies, and updated through its numpy view. Five runs, each with its own hash seed (dict layouts and
    freed addresses differ), the FD hub on and off in turn."""
    seen = []
    for run in range(5):
        work = tmp_path / f"run{run}"
        work.mkdir()
        monkeypatch.setenv("PYTHONHASHSEED", str(run + 1))
        monkeypatch.setenv(HUB_ENV, "1" if run % 2 == 0 else "0")
        r = _check(work, "clone_pair_host_step")
        seen.append(((r.passed, r.signature, r.iteration, tuple(r.iterations), tuple((p.name, p.role) for p in r.params)),
                     [(c.ad, c.fd) for c in r.directions], r))
    first, numbers, r0 = seen[0]
    assert first[:2] == (True, "correct"), (r0.reason, r0.notes)
    for fp, nums, other in seen[1:]:
        assert fp == first, (fp, first, other.notes)
        assert len(nums) == len(numbers)
        for (ad, fd), (ad0, fd0) in zip(nums, numbers):
            assert ad == pytest.approx(ad0, rel=1e-9)
            assert fd == pytest.approx(fd0, rel=1e-6, abs=1e-9)


def test_a_chaotic_horizon_is_inconclusive_with_the_measured_reason_never_wrong(tmp_path):
    """Kicked rotors over 30 steps: |grad| ~ 1e8 in float32, FD cannot converge. No verdict, with the sweep
    that shows it and the checks that can resolve it; the same program over 4 steps resolves and passes."""
    r = _check(tmp_path, "standard_map_horizon")
    assert (r.passed, r.signature) == (None, "inconclusive"), (r.signature, r.explanation)
    assert r.fd_unconverged and "does not converge" in r.reason
    assert any("shorter horizon" in s for s in r.next_steps) and any("float64" in s for s in r.next_steps)
    assert all(c.status != "agree" or abs(c.ad - c.fd) <= c.band for c in r.directions)


def test_the_same_rotors_over_a_short_horizon_resolve(tmp_path):
    r = _check(tmp_path, "standard_map_horizon", "--steps", "4")
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.notes)
    assert not r.fd_unconverged
    assert all(c.status != "agree" or abs(c.ad - c.fd) <= c.band for c in r.directions)


def test_a_clamp_adjoint_wrong_on_a_band_of_entries_is_a_sparse_subset_at_exactly_those_entries(tmp_path):
    r = _check(tmp_path, "clamp_adjoint_band", "--bug-band")
    assert (r.passed, r.signature) == (False, "sparse_subset"), (r.signature, r.explanation)
    rng = np.random.default_rng(4)  # the fixture's draw: which valves start inside the bug's band (0.9, 1)
    u = np.where(rng.uniform(size=96) < 0.85, rng.uniform(0.1, 0.8, 96), rng.uniform(0.92, 0.98, 96))
    band = set(np.flatnonzero(u > 0.9).tolist())
    bad = {e.index[0] for e in r.elements if e.status == "disagree"}
    good = {e.index[0] for e in r.elements if e.status == "agree"}
    assert bad and bad <= band and not good & band, (bad, good, band)


def test_the_same_clamp_with_its_right_adjoint_is_correct(tmp_path):
    r = _check(tmp_path, "clamp_adjoint_band")
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.notes)
