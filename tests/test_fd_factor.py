"""Exact factors read from AD/FD: a hand seed of 1 on a mean loss is a factor N at every checked iteration,
however few entries the parameter has."""

import numpy as np
import pytest
from fd_programs import write_fd_program

from warpgrad.tools import fd
from warpgrad.tools.gradcheck import GradcheckArgs, check


def _factor_report(n_entries: int, factor: float, n_directions: int = 3):
    rng = np.random.default_rng(n_entries)
    value = rng.uniform(0.5, 1.5, n_entries)

    def evaluate(batch):
        return [fd.Evaluation(float(np.sum(np.sin(value + pert.get("p", 0.0)))),
                              applied={"p": pert.get("p", np.zeros_like(value))}) for pert in batch]

    grad = factor * np.cos(value)
    engine = fd.FDEngine([fd.Param(key="p", name="w", value=value, grad=grad)], evaluate,
                         float(np.sum(np.sin(value))), n_directions=n_directions)
    return fd.classify(engine.check(), grads=[grad], backward_calls=1, stale={})


@pytest.mark.parametrize(("n_entries", "n_directions"), [(2, 3), (3, 3), (3, 2), (40, 3)])
def test_a_mean_seeded_with_ones_is_an_exact_factor_whatever_the_entry_count(n_entries, n_directions):
    sig, factor, why = _factor_report(n_entries, 64.0, n_directions)
    assert (sig, factor) == ("exact_factor", 64.0), why


def test_a_single_entry_off_by_a_large_factor_is_only_wrong():
    # one entry: every error is "proportional", so only a small clean factor is read as one
    assert _factor_report(1, 64.0)[0] == "subtly_wrong"
    assert _factor_report(1, 2.0)[:2] == ("exact_factor", 2.0)


@pytest.mark.warp
def test_a_hand_seed_of_one_on_a_mean_loss_is_exact_factor_at_every_checked_iteration(tmp_path):
    write_fd_program(tmp_path, "mean_seeded_ones")
    r = check(GradcheckArgs(script="sim.py", record=False), tmp_path)
    assert r.ok and (r.passed, r.signature, r.factor) == (False, "exact_factor", 64.0), (r.signature, r.explanation)
    assert sorted(r.iterations) == [0, 1]
    other = [n for n in r.notes if n.startswith("iteration ")]
    assert other and "failed (exact_factor" in other[0], r.notes
