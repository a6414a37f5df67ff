"""Capture on the shapes real user code takes (issue: capture that is right on code we did not write).

Each program under tests/fixtures/shapes/ is written the way outside users write Warp training loops; the
expected outcome of each was measured independently (FD of the reported objective in float64 by hand, or
the program's construction: a stale read applies zeros at the first update). A shape capture cannot follow
must end in no verdict with its reason, never in `correct`.
"""

import shutil
from pathlib import Path

import pytest

from warpgrad.tools.gradcheck import GradcheckArgs, check

pytestmark = pytest.mark.warp

SHAPES = Path(__file__).parent / "fixtures" / "shapes"


def _check(tmp_path: Path, name: str, *args: str):
    shutil.copy(SHAPES / f"{name}.py", tmp_path / "train.py")
    return check(GradcheckArgs(script="train.py", args=list(args), record=False), tmp_path)


def test_parameters_rebuilt_from_numpy_each_iteration_are_correct_and_checked_at_two_iterations(tmp_path):
    r = _check(tmp_path, "rebuild_each_iter")
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.notes)
    assert r.iterations == [0, 1]
    assert r.evaluations <= 18  # the sweep and three directions at the later iteration, three at the first


def test_a_rebuilt_parameter_with_another_bug_is_never_blamed_on_accumulation(tmp_path):
    r = _check(tmp_path, "rebuild_each_iter", "--recycle")
    assert r.passed is False
    assert r.signature != "grows_across_iterations", r.explanation


def test_a_gradient_read_before_backward_is_the_consumed_gradient(tmp_path):
    r = _check(tmp_path, "stale_host_read")
    # The update at iteration 0 applies the zeros read before the first backward.
    assert (r.passed, r.signature, r.iteration) == (False, "zero", 0), (r.reason, r.notes)
    assert any("BEFORE this iteration's backward" in p.how for p in r.params)
    assert any("WG015" in n for n in r.notes)


def test_hand_seeded_terms_against_a_reported_mean_give_the_factor_from_ad_over_fd(tmp_path):
    r = _check(tmp_path, "seeded_terms_mean")
    assert (r.passed, r.signature) == (False, "exact_factor"), (r.reason, r.notes)
    assert r.factor == pytest.approx(256.0, rel=1e-3)  # N = 256 terms: sum seeded, mean reported
    assert r.ratio_mean == pytest.approx(256.0, rel=1e-3)


@pytest.mark.parametrize("args", [(), ("--drop-velocity-adjoint",)])
def test_a_hand_written_checkpointed_backward_is_declined_never_passed(tmp_path, args):
    r = _check(tmp_path, "checkpoint_rollout", *args)
    assert r.passed is None and r.signature == "inconclusive"
    assert "multi-tape backward" in r.reason and "probe" in r.reason


def test_a_parameter_first_used_by_a_clone_is_perturbed_at_its_storage(tmp_path):
    r = _check(tmp_path, "clone_first_use")
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.directions)


def test_mixed_scale_vector_lanes_get_their_own_step(tmp_path):
    r = _check(tmp_path, "mixed_scale_vec3")
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.directions)


def test_warps_shipped_fluid_checkpoint_example_gets_no_false_alarm(tmp_path):
    pytest.importorskip("PIL")  # the example imports Pillow
    import warp

    src = Path(warp.__file__).parent / "examples" / "optim" / "example_fluid_checkpoint.py"
    shutil.copy(src, tmp_path / "train.py")
    r = check(GradcheckArgs(script="train.py", record=False, timeout_s=600,
                            args=["--num-frames", "20", "--train-iters", "3", "--pressure-iterations", "5",
                                  "--headless"]), tmp_path)
    assert r.passed is not False, (r.signature, r.explanation)
    assert r.passed is None and r.reason  # a checkpointed backward: declined, with the reason


def test_a_one_off_sanity_backward_before_training_is_not_truncation(tmp_path):
    r = _check(tmp_path, "sanity_check_then_train")
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.explanation)


def test_the_parameter_change_shows_which_gradient_a_plain_step_applied(tmp_path):
    # The fresh gradient is read and logged, but the step applies the one kept from the previous iteration.
    r = _check(tmp_path, "lagged_gradient")
    assert r.passed is False and r.stale_read, (r.signature, r.notes)
    assert any("follows the gradient of 1 iteration(s) earlier" in n for n in r.notes)


def test_a_plain_host_step_is_cross_checked_against_the_consumed_gradient(tmp_path):
    r = _check(tmp_path, "rebuild_each_iter")
    assert any("plain step along the consumed gradient" in n for n in r.notes), r.notes


@pytest.mark.parametrize(("args", "passed"), [((), False), (("--log-only",), True)])
def test_a_parameter_read_by_an_untaped_kernel_before_the_tape_is_perturbed_there(tmp_path, args, passed):
    # The perturbation goes in before the parameter's first use of any kind, so FD sees the path through the
    # untaped kernel that AD misses; when that path only feeds a log, the gradient is right.
    r = _check(tmp_path, "untaped_param_kernel", *args)
    assert r.passed is passed, (r.signature, r.explanation, r.notes)
    if not passed:
        assert r.params[0].role.startswith("untaped:")


def test_a_scalar_loss_logged_as_a_mean_is_not_a_factor_bug(tmp_path):
    # The loss passed to backward is the objective the user built; the log line's scale is cosmetic.
    r = _check(tmp_path, "scalar_loss_printed_mean")
    assert (r.passed, r.signature) == (True, "correct"), (r.signature, r.explanation)
    assert any("prints 0.03125× the loss it passes to backward" in n for n in r.notes), r.notes


def test_a_fixed_weighting_seeded_on_cost_terms_is_an_objective_not_a_handed_over_adjoint(tmp_path):
    r = _check(tmp_path, "weighted_terms_seed")
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.explanation)


def test_a_wrong_small_lane_of_a_mixed_scale_vector_is_found(tmp_path):
    r = _check(tmp_path, "mixed_scale_vec3", "--component-overwrite")
    assert r.passed is False, (r.signature, r.explanation)


def test_an_objective_the_perturbation_never_reaches_is_named_as_such_not_as_a_staircase(tmp_path):
    # `dt` is a constant of the script: differencing it can only give exactly 0 at every step.
    shutil.copy(SHAPES / "rebuild_each_iter.py", tmp_path / "train.py")
    r = check(GradcheckArgs(script="train.py", objective="dt", record=False), tmp_path)
    assert r.passed is None and r.perturbation_unreached, (r.signature, r.reason)
    assert "never reached" in r.reason and "piecewise" not in r.reason
    assert r.objective_kind == "partial"


@pytest.mark.parametrize("args", [(), ("--drop-velocity-adjoint",)])
def test_one_element_adjoints_handed_between_checkpointed_segments_are_not_a_loss(tmp_path, args):
    # The state is one shell (one-element arrays): each boundary adjoint looks like a scalar loss seed, but it
    # is the gradient the script read after the next segment's backward. Checking one segment's seeded dot
    # product passed the version that drops the velocity adjoint; a piece of a backward is never `correct`.
    r = _check(tmp_path, "checkpoint_scalar_state", *args)
    assert r.passed is None and r.signature == "inconclusive", (r.signature, r.reason)
    assert "multi-tape backward" in r.reason and "read after another backward" in r.reason


@pytest.mark.parametrize("style", [(), ("--grads-kwarg",)])
def test_a_hand_seed_of_one_on_a_sum_reported_as_its_mean_is_an_exact_factor(tmp_path, style):
    """The seed is the user's claim of d(objective)/d(seeded array), and the objective is what the script
    reports (here a mean over 25 drones under its own name, "landing miss"): a seed of 1 on the sum makes the
    update apply 25 times the reported objective's gradient, by `.grad.fill_` or by `grads=` alike."""
    r = _check(tmp_path, "scalar_hand_seed_reported_mean", *style)
    assert (r.passed, r.signature, r.factor) == (False, "exact_factor", 25.0), (r.signature, r.reason, r.notes)
    assert r.printed_vs_seeded == "factor"


def test_the_same_sum_seeded_with_one_over_n_is_correct(tmp_path):
    r = _check(tmp_path, "scalar_hand_seed_reported_mean", "--mean-seed")
    assert (r.passed, r.signature) == (True, "correct"), (r.signature, r.reason, r.notes)


def test_a_reported_loss_from_another_computation_than_the_taped_one_is_never_called_correct(tmp_path):
    """The tape holds a coarse rollout; the loss the script reports (every 5 iterations) comes from a fine one
    that is never taped and the seeded loss is never read. AD agrees with FD of the coarse loss, which says
    nothing about the reported objective: no verdict, with the call that names the reported loss."""
    r = _check(tmp_path, "coarse_taped_fine_reported")
    assert (r.passed, r.signature) == (None, "inconclusive"), (r.signature, r.reason)
    assert "different quantity" in r.reason and "--objective" in r.next_steps[0]


def test_the_taped_loss_reported_at_a_cadence_is_still_checked_as_the_objective(tmp_path):
    r = _check(tmp_path, "coarse_taped_fine_reported", "--report-taped")
    assert (r.passed, r.signature) == (True, "correct"), (r.signature, r.reason, r.notes)
