"""`sparse_subset` from an entry-by-entry comparison: most entries of the gradient exactly right and a subset
zero or wrong, read from a bounded, seeded sample of entries."""

import numpy as np
import pytest
from fd_programs import write_fd_program

from warpgrad.tools import fd
from warpgrad.tools.gradcheck import GradcheckArgs, check


def _report(grad_fn, n=48, seed=0):
    rng = np.random.default_rng(5)
    value = rng.uniform(0.5, 1.5, n)
    true = 3 * value**2

    def evaluate(batch):
        return [fd.Evaluation(float(np.sum((value + pert.get("p", 0.0)) ** 3)),
                              applied={"p": pert.get("p", np.zeros_like(value))}) for pert in batch]

    engine = fd.FDEngine([fd.Param(key="p", name="p", value=value, grad=grad_fn(true.copy()))], evaluate,
                         float(np.sum(value**3)), seed=seed)
    report = engine.check()
    return report, fd.classify(report, grads=[grad_fn(true.copy())], backward_calls=1, stale={}), engine


def _zero_every_fifth(g):
    g[::5] = 0.0
    return g


def test_a_zeroed_subset_is_sparse_subset_within_a_bounded_number_of_evaluations():
    report, (sig, _, why), engine = _report(_zero_every_fifth)
    assert sig == "sparse_subset", why
    assert len(report.elements) == fd.SUBSET_SAMPLE
    # the sweep, two more directions, each disagreeing direction and entry followed down two steps, the entries
    assert engine.evaluations <= 2 * (len(fd.STEPS) + 2 + 3 * 2 + fd.SUBSET_SAMPLE + 2 * fd.ELEMENTS_FOLLOWED)
    assert all(e.status == "disagree" for e in report.elements if e.index[0] % 5 == 0)
    assert all(e.status == "agree" for e in report.elements if e.index[0] % 5)
    assert "exactly zero" in why


def test_a_gradient_wrong_at_every_entry_stays_subtly_wrong():
    noise = np.random.default_rng(9).uniform(0.6, 1.4, 48)
    _, (sig, _, why), _ = _report(lambda g: g * noise)
    assert sig == "subtly_wrong", why


def test_an_exact_factor_spends_nothing_on_entries():
    report, (sig, factor, _), _ = _report(lambda g: 2 * g)
    assert (sig, factor) == ("exact_factor", 2.0) and report.elements == []


def test_the_sample_is_bounded_deterministic_and_covers_the_smallest_entries():
    g = np.arange(100, dtype=float)[::-1].copy()
    g[[3, 50, 77]] = 0.0
    picks = fd._sample(g, 16, seed=4)
    assert picks == fd._sample(g, 16, seed=4) and len(picks) == 16
    assert {3, 50, 77} <= {i for i, _ in picks}
    assert sum(p == "random" for _, p in picks) == 8
    assert fd._sample(g[:10], 16, seed=4) == [(i, "all") for i in range(10)]


@pytest.mark.warp
@pytest.mark.parametrize("name", ["soft_cap_zeroed", "smooth_abs_sign"])
def test_programs_with_a_wrong_subset_get_sparse_subset(tmp_path, name):
    write_fd_program(tmp_path, name)
    r = check(GradcheckArgs(script="sim.py", record=False), tmp_path)
    assert r.ok and r.passed is False and r.signature == "sparse_subset", (r.signature, r.explanation, r.elements)
    bad = [e for e in r.elements if e.status == "disagree"]
    assert bad and len(bad) < len(r.elements) / 2


def test_a_whole_lane_wrong_is_a_component_formula_not_a_subset():
    rng = np.random.default_rng(2)
    value = rng.uniform(0.5, 1.5, (10, 3))
    grad = 3 * value**2
    grad[:, 2] *= 1.7  # the formula of the third component is wrong for every entry

    def evaluate(batch):
        return [fd.Evaluation(float(np.sum((value + pert.get("p", 0.0)) ** 3)),
                              applied={"p": pert.get("p", np.zeros_like(value))}) for pert in batch]

    engine = fd.FDEngine([fd.Param(key="p", name="q", value=value, grad=grad)], evaluate, float(np.sum(value**3)))
    report = engine.check()
    sig, _, why = fd.classify(report, grads=[grad], backward_calls=1, stale={})
    assert sig == "subtly_wrong" and "lane 2 of q" in why, why


def test_an_error_that_grows_smoothly_across_entries_is_not_a_subset():
    # a reused buffer: the error grows along the chain, inside the band for the first entries only
    _, (sig, _, why), _ = _report(lambda g: g * (1 + np.linspace(0.0, 0.06, g.size)), n=6)
    assert sig == "subtly_wrong", why
