"""Resolution per direction: every direction is `agree`, `disagree` or `unresolved`, only resolved ones vote,
and a sweep that does not converge gives no verdict with the step that can resolve it."""

import numpy as np
import pytest
from fd_programs import write_fd_program

from warpgrad.tools import fd
from warpgrad.tools.gradcheck import GradcheckArgs, check


def _engine(loss, grad, value, **kw):
    def evaluate(batch):
        return [fd.Evaluation(float(loss(value + pert.get("p", 0.0))), applied={"p": pert.get("p", np.zeros_like(value))})
                for pert in batch]

    return fd.FDEngine([fd.Param(key="p", name="p", value=value, grad=grad)], evaluate, float(loss(value)), **kw)


def _consistent(c: fd.DirectionCheck) -> bool:
    """The status a direction shows follows from the numbers it shows beside it."""
    err, signal = abs(c.ad - c.fd), max(abs(c.ad), abs(c.fd))
    if c.status == "agree":
        return err <= c.band < 0.25 * signal and c.rounding_band < 0.25 * signal and c.agree
    if c.status == "disagree":
        return (err > c.band or not np.isfinite(c.ad)) and not c.agree
    # unresolved: rounding or the band swamps the signal, or FD kept moving down the steps it lists
    moving = len(c.steps) >= 3 and c.ratio is None
    return (c.rounding_band >= 0.25 * signal or c.band >= 0.25 * signal or moving) and not c.agree


def test_a_direction_swamped_by_rounding_is_unresolved_never_agree():
    engine = _engine(lambda p: np.sum(p**2), np.ones(3), np.ones(3))
    swamped = engine._direction_check(0, "all", fd=1.0, ad=1.43, rounding=2.0, truncation=0.0)
    wide = engine._direction_check(1, "all", fd=1.0, ad=1.43, rounding=0.01, truncation=0.5)
    assert swamped.status == wide.status == "unresolved" and not swamped.agree and not wide.agree
    assert swamped.ratio is None and wide.ratio is None
    clear = engine._direction_check(2, "all", fd=1.0, ad=1.43, rounding=1e-6, truncation=1e-5)
    assert clear.status == "disagree" and abs(clear.ad - clear.fd) > clear.band


def test_only_resolved_directions_vote():
    def c(status):
        return fd.DirectionCheck(direction=0, scope="all", step=1e-3, ad=1.0, fd=1.0, band=1e-6, status=status,
                                 agree=status == "agree")

    assert fd._vote([c("agree"), c("unresolved")]) == "agree"
    assert fd._vote([c("unresolved"), c("disagree")]) == "disagree"
    assert fd._vote([c("unresolved"), c("unresolved")]) == "inconclusive"


@pytest.mark.parametrize("factor", [1.0, 1.43, 0.0])
def test_every_direction_shows_a_status_its_own_numbers_support(factor):
    rng = np.random.default_rng(7)
    value = rng.uniform(0.5, 1.5, 12).astype(np.float32)
    # float32 objective with a large offset: rounding is a real share of the change at the small steps
    def loss(p):
        return np.float32(np.sum(np.sin(p.astype(np.float32)) * 3, dtype=np.float32) + np.float32(2e3))

    engine = _engine(loss, factor * 3 * np.cos(value.astype(float)), value.astype(float), n_directions=4, seed=2)
    report = engine.check(elements=8)
    checks = report.directions + report.per_param
    assert checks and all(_consistent(c) for c in checks), [(c.status, c.ad, c.fd, c.band) for c in checks]
    assert all(c.steps and any(s.step == c.step for s in c.steps) for c in report.directions)
    assert len(report.directions[0].steps) >= len(fd.STEPS)  # the sweep direction shows FD at every swept step
    if factor == 1.0:
        assert report.verdict == "agree"
    else:
        assert report.verdict == "disagree"


def _logistic(x0: np.ndarray, steps: int) -> tuple[float, np.ndarray]:
    """float32 forward of a chaotic map, and its exact derivative (float64 chain rule)."""
    x, dx = x0.astype(np.float32), np.ones_like(x0, dtype=float)
    for _ in range(steps):
        dx = dx * 3.9 * (1.0 - 2.0 * x.astype(float))
        x = np.float32(3.9) * x * (np.float32(1) - x)
    return float(np.sum((x - np.float32(0.5)) ** 2, dtype=np.float32)), 2.0 * (x.astype(float) - 0.5) * dx


def test_a_chaotic_horizon_gives_no_verdict_with_the_measured_reason():
    x0 = np.linspace(0.21, 0.69, 6)
    _, grad = _logistic(x0, 50)
    report = _engine(lambda p: _logistic(p, 50)[0], grad, x0).check(elements=8)
    assert report.verdict == "inconclusive" and report.unconverged, report
    assert "does not converge" in report.reason and "chaos" in report.reason
    sig, _, _ = fd.classify(report, grads=[grad], backward_calls=1, stale={})
    assert sig == "inconclusive"


def test_the_same_map_over_a_short_horizon_resolves():
    x0 = np.linspace(0.21, 0.69, 6)
    _, grad = _logistic(x0, 3)
    report = _engine(lambda p: _logistic(p, 3)[0], grad, x0).check()
    assert report.verdict == "agree" and not report.unconverged


@pytest.mark.warp
def test_a_chaotic_program_is_inconclusive_and_offers_the_checks_that_can_resolve_it(tmp_path):
    write_fd_program(tmp_path, "logistic_chaos")
    r = check(GradcheckArgs(script="sim.py", record=False), tmp_path)
    assert r.ok and r.passed is None and r.signature == "inconclusive", (r.signature, r.reason)
    assert r.fd_unconverged and "does not converge" in r.reason
    assert any("bisect --script sim.py" in s for s in r.next_steps)
    assert any("float64" in s for s in r.next_steps)


@pytest.mark.warp
def test_a_long_but_stable_horizon_still_resolves(tmp_path):
    write_fd_program(tmp_path, "damped_long")
    r = check(GradcheckArgs(script="sim.py", record=False), tmp_path)
    assert r.ok and (r.passed, r.signature) == (True, "correct"), (r.reason, r.directions)
    assert not r.fd_unconverged and not r.next_steps
    assert all(_consistent(c) for c in r.directions)


def _steep(width: float, factor: float = 1.0):
    """A smooth but steep gate (tanh of width `width`) at the parameter's value, and AD `factor`× its slope."""
    value = np.zeros(1)
    engine = _engine(lambda p: np.tanh(p[0] / width), np.array([factor / width]), value)
    d = {"p": np.ones(1)}
    t = 1e-2
    evs = engine.evaluate(fd._pair(d, t))
    f, a, rb, mag = engine._point(d, t, evs[0], evs[1])
    return engine, d, engine._direction_check(0, "all", f, a, rb, 0.0, mag, step=t), t


def test_a_direction_whose_fd_keeps_moving_with_the_step_is_unresolved_not_wrong():
    engine, d, c, t = _steep(1e-4)  # a gate far steeper than the step the sweep chose elsewhere
    assert c.status == "disagree"
    followed = engine._follow(d, c, t)
    assert followed.status == "unresolved" and not followed.agree and followed.ratio is None
    assert [s.step for s in followed.steps] == [t, t / 10, t / 100]


def test_a_direction_that_agrees_at_a_smaller_step_agrees_and_a_settled_one_stays_wrong():
    engine, d, c, t = _steep(2e-2)
    assert engine._follow(d, c, t).status == "agree"
    engine, d, c, t = _steep(2e-1, factor=1.43)
    stays = engine._follow(d, c, t)
    assert stays.status == "disagree" and len(stays.steps) == 2  # FD settled at t/10: no third step spent


@pytest.mark.warp
@pytest.mark.parametrize("name", ["sigmoid_gate", "where_gated_contact"])
def test_a_correct_program_with_a_steep_or_where_gated_contact_is_never_called_wrong(tmp_path, name):
    write_fd_program(tmp_path, name)
    r = check(GradcheckArgs(script="sim.py", record=False), tmp_path)
    assert r.ok and r.passed is not False, (r.signature, r.explanation, r.directions)
    assert all(_consistent(c) for c in r.directions)
