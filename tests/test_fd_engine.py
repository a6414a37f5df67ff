"""The FD engine's own safeguards, on objectives written in numpy (the engine never imports Warp)."""

import numpy as np

from warpgrad.tools import fd


def _engine(grad_factor: float = 1.0, lanes: bool = False):
    rng = np.random.default_rng(3)
    value = rng.uniform(0.5, 1.5, (6, 3) if lanes else 6)

    def loss(p):
        return float(np.sum(p**3))

    def evaluate(batch):
        return [fd.Evaluation(loss(value + pert.get("p", 0.0)), applied={"p": pert.get("p", np.zeros_like(value))})
                for pert in batch]

    param = fd.Param(key="p", name="p", value=value, grad=grad_factor * 3 * value**2)
    return fd.FDEngine([param], evaluate, loss(value), n_directions=3, seed=0)


def _judged_at(engine, t):
    dirs = fd.directions(engine.params, 3, 0)
    checks = []
    for k, d in enumerate(dirs):
        evs = engine.evaluate(fd._pair(d, t))
        f, a, rb, mag = engine._point(d, t, evs[0], evs[1])
        checks.append(engine._direction_check(k, "all", f, a, rb, 0.0, mag))
    return dirs, checks


def test_a_disagreement_that_is_fds_own_truncation_error_goes_away_at_a_smaller_step():
    engine = _engine()
    dirs, checks = _judged_at(engine, 0.3)  # a cubic: central FD at a large step is off by t²
    assert not all(c.agree for c in checks)
    confirmed = engine._confirm(dirs, checks, 0.3)
    assert sum(c.agree for c in confirmed) > sum(c.agree for c in checks)
    assert all(c.step in (0.03, 0.003) for c, old in zip(confirmed, checks) if not old.agree and c.agree)


def test_a_wrong_gradient_stays_wrong_at_the_smaller_step():
    engine = _engine(grad_factor=2.0)
    dirs, checks = _judged_at(engine, 0.3)
    confirmed = engine._confirm(dirs, checks, 0.3)
    assert not any(c.agree for c in confirmed)


def test_scales_are_per_lane_for_vector_parameters():
    value = np.stack([np.full(4, 15.0), np.full(4, 0.05), np.full(4, -2.0)], axis=1)
    p = fd.Param(key="p", name="p", value=value, grad=np.zeros_like(value))
    assert np.allclose(p.scale, [15.0, 0.05, 2.0])
    assert p.scale_at(1) == 0.05 and p.scale_at(3) == 15.0


def test_a_constant_ratio_of_one_is_never_an_exact_factor():
    report = fd.FDReport(verdict="disagree", ratio_mean=0.9989, ratio_spread=0.003, directions=[
        fd.DirectionCheck(direction=k, scope="all", step=1e-3, ad=1.0, fd=1.001, band=1e-6, ratio=0.999, agree=False)
        for k in range(3)])
    sig, factor, _ = fd.classify(report, grads=[np.ones(10)], backward_calls=1, stale={})
    assert sig != "exact_factor" and factor is None


def _counting(engine):
    """The engine with its evaluator wrapped to count the requests (round trips to the evaluations) it makes."""
    requests = []
    inner = engine.evaluate

    def evaluate(batch):
        requests.append(len(batch))
        return inner(batch)

    engine.evaluate = evaluate
    return requests


def test_disagreeing_directions_are_followed_together_one_request_per_step_with_each_judged_as_alone():
    """Following every disagreeing direction down in step asks for each step once for all of them (a round trip
    to the FD hub costs a fork and a reply), and judges each direction exactly as following it alone does."""
    for factor, t in ((2.0, 0.3), (1.0, 0.3), (2.0, 1e-3)):
        engine = _engine(grad_factor=factor)
        dirs, checks = _judged_at(engine, t)
        todo = [c for c in checks if c.status == "disagree"]
        assert len(todo) >= 2, (factor, t)
        requests = _counting(engine)
        together = engine._confirm(dirs, checks, t)
        assert 1 <= len(requests) <= 2 and sum(requests) <= 4 * len(todo)
        alone = [engine._follow(dirs[c.direction], c, t) if c.status == "disagree" else c for c in checks]
        assert [c.model_dump() for c in together] == [c.model_dump() for c in alone]


def test_a_wrong_gradients_whole_check_makes_one_request_per_stage():
    for factor in (2.0, 0.5):
        engine = _engine(grad_factor=factor)
        requests = _counting(engine)
        report = engine.check()
        assert report.verdict == "disagree"
        # The sweep, the other two directions, then all three directions confirmed at t/10 (each settles there):
        # three requests (one per direction and step before).
        assert requests == [6, 4, 6], requests
