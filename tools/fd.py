"""The finite-difference engine: directional central differences with a step sweep and a noise band.

The cost does not grow with the parameter count: every check differentiates the objective along a few
seeded Gaussian directions `v` (entries ~N(0, 1), scaled per parameter by its RMS value), so it needs
`2 * (len(steps) + n_directions - 1)` objective evaluations plus one backward, instead of Warp's
`2 + 2N`. Pass/fail is judged against the FD noise band measured by the sweep (truncation error
between neighbouring steps plus float32 rounding of the objective), not a guessed tolerance.

For a direction `d` and step `t`, with the perturbation actually applied to the arrays `a±`
(float32 rounding makes it differ from `±t d`):

    fd = (L(p + a+) - L(p + a-)) / 2t          ad = sum_p grad_p · (a+_p - a-_p) / 2t

Pure numpy: it never imports Warp. `evaluate` runs the objective (a subprocess per evaluation for
captured scripts, in-process calls for probes).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from .signatures import Signature

STEPS = (1e-2, 1e-3, 1e-4)
SPARSE_ZOOM_MAX = 64  # entries checked one by one when a non-smooth objective needs a closer look
# Entries compared one by one when the directions disagree without a constant ratio: enough to tell "a subset
# is wrong" from "every entry is wrong" (2 evaluations each, only on failure).
SUBSET_SAMPLE = 16
ELEMENTS_FOLLOWED = 8  # disagreeing entries followed down in step (2-4 evaluations each)
# Rounding of a float32 objective: the summation in a loss kernel loses a few ulps more than one op.
ROUNDING_ULPS = 8.0
REL_SLACK = 1e-4


@dataclass
class Param:
    key: str  # what the evaluator perturbs (a role for captures, a name for probes)
    name: str
    value: np.ndarray
    grad: np.ndarray

    @property
    def scale(self) -> np.ndarray:
        """The step scale per scalar lane: the RMS of each component of a vector type (last numpy axis) taken
        separately, so a lane around 0.05 beside one around 15 gets a step it can resolve; plain arrays have
        one lane. Broadcasts against `value`."""
        if not self.value.size:
            return np.ones(1)
        v = self.value if self.value.ndim >= 2 else self.value.reshape(-1, 1)
        rms = np.sqrt(np.mean(np.square(v.reshape(-1, v.shape[-1])), axis=0))
        rms = np.where(rms > 1e-6, rms, 1.0)
        return rms if self.value.ndim >= 2 else rms.reshape(())

    def scale_at(self, flat_index: int) -> float:
        """The step scale of one entry (by flat index)."""
        sc = np.broadcast_to(self.scale, self.value.shape).reshape(-1)
        return float(sc[flat_index])


@dataclass
class Evaluation:
    objective: float | None
    applied: dict[str, np.ndarray] | None = None  # key -> perturbation actually applied
    error: str | None = None


Evaluator = Callable[[list[dict[str, np.ndarray]]], list[Evaluation]]


class SweepPoint(BaseModel):
    step: float
    fd: float
    ad: float
    rounding_band: float
    magnitude: float = Field(0.0, description="sum |grad_i dv_i| / 2t: the size of the terms AD·v adds up")


Status = Literal["agree", "disagree", "unresolved"]
Pick = Literal["all", "random", "smallest", "largest"]


class DirectionCheck(BaseModel):
    """One direction, judged on its own: `agree` means |ad - fd| <= band, `disagree` means it exceeds the band,
    `unresolved` means the objective's float rounding at this step is comparable to the signal (neither AD·v
    nor FD·v rises clearly above `rounding_band`), or that the band is a quarter of the signal or more, or that
    FD kept moving as the step shrank along this direction: it says nothing and does not vote."""

    direction: int
    scope: str = Field(description="'all' or the parameter name the direction is restricted to")
    step: float
    ad: float = Field(description="AD·v: the captured gradient dotted with the applied perturbation / 2t")
    fd: float = Field(description="FD·v: (L+ - L-) / 2t")
    band: float = Field(description="the tolerance |ad - fd| was judged against: 3 × (rounding + truncation) "
                        "plus a relative slack of 1e-4 of the terms; agree exactly when |ad - fd| <= band")
    rounding_band: float = Field(0.0, description="float rounding of the objective at this step, divided by 2t")
    truncation: float = Field(0.0, description="FD truncation error at this step, from the sweep")
    ratio: float | None = None
    status: Status = "agree"
    agree: bool = Field(description="status == 'agree' (kept for readers of earlier results)")
    steps: list[SweepPoint] = Field(default_factory=list, description="FD and AD along this direction at every "
                                    "step it was evaluated at (the sweep's steps for direction 0)")


class ElementCheck(BaseModel):
    param: str
    index: list[int]
    ad: float
    fd: float
    agree: bool
    status: Status = Field("agree", description="as a direction's: unresolved entries do not vote")
    pick: Pick = Field(
        "all", description="why this entry was checked: every entry (a small parameter), a seeded uniform draw (what "
        "share of entries disagrees), or the smallest/largest |AD| (where a zeroed subset or the strongest terms are)")


class FDReport(BaseModel):
    verdict: str = Field(description="agree | disagree | inconclusive | sparse (non-smooth, mismatch only at kinks)")
    reason: str = ""
    step: float | None = None
    noise_band: float | None = None
    sweep: list[SweepPoint] = []
    directions: list[DirectionCheck] = []
    per_param: list[DirectionCheck] = []
    elements: list[ElementCheck] = []
    ratio_mean: float | None = None
    ratio_spread: float | None = None
    flat: bool = Field(False, description="AD is exactly zero and the objective did not move at the small steps")
    unresolvable: bool = Field(False, description="The objective's float rounding is comparable to its change at "
                               "every step")
    unreached: bool = Field(False, description="The objective never moved under any perturbation (not even the "
                            "largest step): the perturbation did not reach it")
    trunc_rel: float | None = Field(None, description="FD truncation error relative to the size of the terms, "
                                    "from the sweep (carried to a second check at the same step)")
    unconverged: bool = Field(False, description="No two neighbouring steps of the sweep give the same FD within "
                              "5% (or their rounding): FD does not converge, so it cannot judge the gradient")
    evaluations: int = 0


def directions(params: list[Param], n: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        # Gaussian, not Rademacher: with a handful of entries, sign patterns repeat and two "random"
        # directions can be the same line, which would fake a constant AD/FD ratio.
        out.append({p.key: p.scale * rng.standard_normal(size=p.value.shape) for p in params})
    return out


def _pair(d: dict[str, np.ndarray], t: float) -> list[dict[str, np.ndarray]]:
    return [{k: t * v for k, v in d.items()}, {k: -t * v for k, v in d.items()}]


def _ad(params: list[Param], plus: Evaluation, minus: Evaluation, pert: tuple[dict, dict], t: float) -> tuple[float, float]:
    """AD·v and the magnitude of its terms, sum |grad_i · dv_i| (the scale rounding and truncation act on)."""
    total, mag = 0.0, 0.0
    for p in params:
        ap = (plus.applied or {}).get(p.key, pert[0].get(p.key))
        am = (minus.applied or {}).get(p.key, pert[1].get(p.key))
        if ap is None or am is None:
            continue
        terms = p.grad * (np.asarray(ap).reshape(p.grad.shape) - np.asarray(am).reshape(p.grad.shape))
        total += float(np.sum(terms))
        mag += float(np.sum(np.abs(terms)))
    return total / (2 * t), mag / (2 * t)


@dataclass
class FDEngine:
    params: list[Param]
    evaluate: Evaluator
    base_objective: float
    unit_roundoff: float = 2.0**-24
    steps: tuple[float, ...] = STEPS
    n_directions: int = 3
    seed: int = 0
    evaluations: int = 0
    _step: float = 0.0
    # Told (step, relative truncation error) as soon as the sweep has chosen them, before the directions are
    # compared: the first iteration's check at that step (`check_at`) needs nothing else, so it can start then.
    on_step: Callable[[float, float], None] | None = None

    def _run(self, batch: list[dict[str, np.ndarray]]) -> list[Evaluation]:
        self.evaluations += len(batch)
        return self.evaluate(batch)

    def _rounding(self, *objs: float) -> float:
        mag = max([abs(self.base_objective), *[abs(o) for o in objs]])
        return ROUNDING_ULPS * self.unit_roundoff * mag

    def _point(self, d, t, plus: Evaluation, minus: Evaluation) -> tuple[float, float, float, float]:
        pert = _pair(d, t)
        lp, lm = _objective(plus), _objective(minus)
        fd = (lp - lm) / (2 * t)
        ad, mag = _ad(self.params, plus, minus, (pert[0], pert[1]), t)
        rb = self._rounding(lp, lm) / t
        return fd, ad, rb, mag

    def check(self, per_param: bool = True, elements: int = 0, locate: bool = True) -> FDReport:
        """The whole check: a step sweep along one direction picks the step and the noise band, then every
        direction is compared at that step; on a disagreement, per-parameter and per-element follow-ups.

        Each early return is an inconclusive (or flat, or sparse) verdict that the sweep alone decides."""
        dirs = directions(self.params, self.n_directions, self.seed)
        d0 = dirs[0]
        swept = self._sweep(d0)
        if isinstance(swept, FDReport):
            return swept
        sweep = swept
        verdict = self._judge_sweep(sweep)
        if verdict is not None:
            return verdict
        # The truncation error is estimated only between two steps that both resolve the objective.
        diffs = [(abs(a.fd - b.fd), i) for i, (a, b) in enumerate(itertools.pairwise(sweep)) if _resolvable(a) and _resolvable(b)]
        if not diffs:
            return FDReport(
                verdict="inconclusive", sweep=sweep, evaluations=self.evaluations,
                reason=("only one step resolves the objective above its float rounding, so the FD error cannot be "
                        "estimated; the objective is barely sensitive to the parameters here (or is float32 with a "
                        "large magnitude): check a later iteration, or compute the loss in float64"),
            )
        converged = _converged(sweep)
        if converged is None:
            return self._non_smooth(sweep)
        d_min, i_min = converged
        best = sweep[i_min]
        t = self._step = best.step
        # Truncation error relative to the size of the terms, not to their sum: a direction along which the
        # terms cancel has a small FD·v but no smaller an error.
        trunc_rel = d_min / max(abs(best.fd), best.magnitude, 1e-300)
        band0 = d_min + best.rounding_band
        if self.on_step is not None:
            self.on_step(t, trunc_rel)
        checks = self._directions_at(dirs, t, trunc_rel, self._direction_check(
            0, "all", best.fd, best.ad, best.rounding_band, d_min, best.magnitude, steps=sweep))
        if isinstance(checks, str):
            return FDReport(verdict="inconclusive", reason=f"an FD evaluation failed: {checks}", sweep=sweep,
                            evaluations=self.evaluations)
        checks = self._confirm(dirs, checks, t)
        lanes = self._hidden_lanes(d0, t, trunc_rel, best.magnitude, band0) if _vote(checks) == "agree" else []
        vote = _vote(checks + lanes)
        report = FDReport(verdict=vote, step=t, noise_band=band0, sweep=sweep, directions=checks, per_param=lanes,
                          trunc_rel=trunc_rel, unresolvable=vote == "inconclusive",
                          reason=_UNRESOLVED if vote == "inconclusive" else "")
        _ratios(report, checks)
        if not locate:  # only the verdict is wanted: no per-parameter or per-entry follow-ups
            report.evaluations = self.evaluations
            return report
        if report.verdict == "disagree" and per_param and len(self.params) > 1:
            report.per_param = self._per_param(d0, t, trunc_rel)
        constant_ratio = report.ratio_spread is not None and report.ratio_spread < 5e-3 and len(
            [c for c in checks if c.ratio is not None]) >= 2
        n_elements = elements or (0 if constant_ratio else SUBSET_SAMPLE)
        if report.verdict == "disagree" and n_elements > 0:
            report.elements = self._elements(t, trunc_rel, n_elements, report.per_param)
        report.evaluations = self.evaluations
        return report

    def _sweep(self, d0: dict[str, np.ndarray]) -> list[SweepPoint] | FDReport:
        """FD and AD along `d0` at every step of the sweep (largest first), widened by up to two larger steps
        when fewer than two resolve the objective; an FDReport when the sweep itself fails."""
        evs = self._run([x for t in self.steps for x in _pair(d0, t)])
        err = _first_error(evs)
        if err:
            return FDReport(verdict="inconclusive", reason=f"an FD evaluation failed: {err}", evaluations=self.evaluations)
        sweep = []
        for i, t in enumerate(self.steps):
            fd, ad, rb, mag = self._point(d0, t, evs[2 * i], evs[2 * i + 1])
            sweep.append(SweepPoint(step=t, fd=fd, ad=ad, rounding_band=rb, magnitude=mag))
        if not all(np.isfinite(s.fd) for s in sweep):
            return FDReport(verdict="inconclusive", reason="the objective is not finite near the parameters",
                            sweep=sweep, evaluations=self.evaluations)
        moved = [s.fd != 0.0 for s in sweep]
        if self._locally_flat(moved):
            return sweep  # judged flat by _judge_sweep; larger steps would not change that
        resolvable = [s for s in sweep if _resolvable(s)]
        if len(resolvable) < 2 and self.steps[0] < 1.0 and any(moved):
            # Fewer than two steps rise above the objective's rounding (parameters that sit near zero get a
            # tiny RMS scale): try larger steps, since the truncation error needs two resolvable steps.
            extra = tuple(t for t in (self.steps[0] * 10, self.steps[0] * 100) if t <= 1.0)
            evs = self._run([x for t in extra for x in _pair(d0, t)])
            if not _first_error(evs):
                for i, t in enumerate(extra):
                    fd, ad, rb, mag = self._point(d0, t, evs[2 * i], evs[2 * i + 1])
                    if np.isfinite(fd):
                        sweep.insert(0, SweepPoint(step=t, fd=fd, ad=ad, rounding_band=rb, magnitude=mag))
                sweep.sort(key=lambda s: -s.step)
        return sweep

    def _locally_flat(self, moved: list[bool]) -> bool:
        """AD says exactly zero and the objective did not move at the small steps."""
        return all(not np.any(p.grad) for p in self.params) and not any(moved[1:])

    def _judge_sweep(self, sweep: list[SweepPoint]) -> FDReport | None:
        """The verdicts the sweep alone decides (flat, unresolvable, unreached, piecewise constant); None when
        the sweep resolves the objective well enough to compare directions."""
        moved = [s.fd != 0.0 for s in sweep]
        if self._locally_flat(moved):
            reason = "AD gradient is exactly zero and the objective is locally constant (FD exactly 0 at small steps)"
            if moved[0]:
                reason += "; it jumps at the largest step: a piecewise-constant forward, where zero is the true gradient"
            return FDReport(verdict="agree", reason=reason, sweep=sweep, flat=True, step=self.steps[-1], noise_band=0.0,
                            evaluations=self.evaluations)
        if not any(_resolvable(s) for s in sweep):
            return FDReport(
                verdict="inconclusive", sweep=sweep, evaluations=self.evaluations, unresolvable=True,
                reason=(f"FD cannot resolve this objective: at every step the float rounding of the objective "
                        f"(|L| = {abs(self.base_objective):.3g}) is comparable to its change; the comparison would "
                        "measure float32 cancellation, not the gradient. Reduce the objective's magnitude "
                        "(subtract a constant, normalise) or compute it in float64."),
            )
        if not any(moved):
            return FDReport(
                verdict="inconclusive", sweep=sweep, evaluations=self.evaluations, unreached=True,
                reason=(f"the objective did not change at all under any perturbation, even the largest step "
                        f"({sweep[0].step:g}), while AD·v = {sweep[0].ad:.4g}: the perturbation never reached the "
                        "objective (it was computed before the parameters' first use, or from a copy taken earlier), "
                        "so this is not evidence about the forward or the gradient"),
            )
        if not any(moved[1:]):
            return FDReport(
                verdict="inconclusive", sweep=sweep, evaluations=self.evaluations,
                reason=("the objective does not move at all at the small steps (FD exactly 0 at "
                        f"{', '.join(f'{s.step:g}' for s in sweep[1:])}) while AD·v = {sweep[-1].ad:.4g}: a piecewise-"
                        "constant forward (a floor, a cell index, a threshold) or a perturbation below the objective's "
                        "float resolution; FD cannot judge the gradient here, and a surrogate gradient (straight-through) "
                        "looks exactly like this"),
            )
        return None

    def _non_smooth(self, sweep: list[SweepPoint]) -> FDReport:
        """The FD estimate keeps changing with the step: sparse (element-wise AD matches except at kinks) or
        inconclusive."""
        sparse = self._sparse_at_kinks(sweep[-2].step) if self._size() <= SPARSE_ZOOM_MAX else []
        resolved = [e for e in sparse if e.status != "unresolved"]
        bad = [e for e in resolved if e.status == "disagree"]
        if bad and len(bad) <= 0.25 * len(resolved):
            return FDReport(
                verdict="sparse", sweep=sweep, elements=sparse, evaluations=self.evaluations, step=sweep[-2].step,
                reason=(f"the objective is non-smooth along a random direction, but element by element AD matches "
                        f"FD on {len(resolved) - len(bad)} of {len(resolved)} resolved entries; the rest "
                        f"({', '.join(f'{e.param}{e.index}' for e in bad[:8])}) sit at kinks (contacts, min/max, "
                        "where), where FD cannot choose between valid one-sided slopes"),
            )
        return FDReport(verdict="inconclusive", sweep=sweep, evaluations=self.evaluations, unconverged=True,
                        reason=self._unconverged_reason(sweep))

    def _unconverged_reason(self, sweep: list[SweepPoint]) -> str:
        """What the sweep measured, in numbers: FD at each step, and how far AD's linear prediction of the change
        at the smallest step is from the change seen (chaos predicts changes far beyond the objective)."""
        small = sweep[-1]
        predicted = abs(small.ad) * 2 * small.step
        seen = abs(small.fd) * 2 * small.step
        reason = ("the FD step sweep does not converge: FD·v is "
                  f"{', '.join(f'{s.fd:.4g} at {s.step:g}' for s in sweep)}, and no two neighbouring steps agree "
                  "within 5% or their float rounding, so FD has no value to compare AD with")
        scale = max(abs(self.base_objective), 1e-300)
        if predicted > 10 * max(seen, 1e-300) and predicted > scale:
            reason += (f". AD·v predicts a change of {predicted:.3g} at step {small.step:g} (|L| = {scale:.3g}), the "
                       f"objective changed by {seen:.3g}: a sensitivity that large is chaos or an exploding horizon "
                       "(nearby trajectories separate exponentially), where FD at float32 steps measures noise")
        else:
            reason += ": a non-smooth objective (kinks, contacts, piecewise-constant pieces) or a chaotic horizon"
        return reason

    def _directions_at(self, dirs: list[dict[str, np.ndarray]], t: float, trunc_rel: float,
                       first: DirectionCheck) -> list[DirectionCheck] | str:
        """Compare AD and FD along every other direction at the chosen step (the first is the sweep's own);
        the first evaluation error's message when one fails."""
        checks = [first]
        if len(dirs) > 1:
            evs = self._run([x for d in dirs[1:] for x in _pair(d, t)])
            err = _first_error(evs)
            if err:
                return err
            for k, d in enumerate(dirs[1:], start=1):
                fd, ad, rb, mag = self._point(d, t, evs[2 * k - 2], evs[2 * k - 1])
                checks.append(self._direction_check(k, "all", fd, ad, rb, trunc_rel * max(abs(fd), mag), mag))
        return checks

    def _confirm(self, dirs: list[dict[str, np.ndarray]], checks: list[DirectionCheck], t: float) -> list[DirectionCheck]:
        """Before a disagreement stands, follow that direction down in step (t/10, then t/100 while FD still
        moves): the error of FD itself (curvature or a steep gate the sweep's direction did not show, a kink the
        step crosses) moves with the step, a wrong gradient does not. Agree at a smaller step: agree. FD settles
        (two neighbouring steps within 5%) and still differs from AD: disagree. FD keeps moving along this
        direction down to where rounding swamps it: unresolved, since the step the sweep chose along another
        direction does not hold along this one. 2 evaluations per disagreeing direction (4 where FD is still
        moving), at most 4 directions, only on failure."""
        out = list(checks)
        todo = [(i, c) for i, c in enumerate(checks) if c.status == "disagree"][:4]
        for (i, _), c in zip(todo, self._follow_many([(dirs[c.direction], c) for _, c in todo], t)):
            out[i] = c
        return out

    def _follow(self, d: dict[str, np.ndarray], c: DirectionCheck, t: float) -> DirectionCheck:
        """One disagreeing direction followed down in step (see `_confirm`)."""
        return self._follow_many([(d, c)], t)[0]

    def _follow_many(self, todo: list[tuple[dict[str, np.ndarray], DirectionCheck]], t: float) -> list[DirectionCheck]:
        """Disagreeing directions followed down in step (see `_confirm`), each judged on its own exactly as one
        followed alone, but every direction still moving asks for its next step in one batch: one round trip to
        the evaluations per step instead of one per direction and step (each costs a fork and a reply; on a
        program whose every direction disagrees that was six round trips, now two)."""
        out = [c for _, c in todo]
        prev = [c.fd for _, c in todo]
        steps = [[*c.steps] for _, c in todo]
        active = list(range(len(todo)))
        for small in (t / 10, t / 100):
            if not active:
                break
            evs = self._run([x for k in active for x in _pair(todo[k][0], small)])
            still = []
            for j, k in enumerate(active):
                d, c = todo[k]
                plus, minus = evs[2 * j], evs[2 * j + 1]
                if _first_error([plus, minus]):
                    out[k] = c.model_copy(update={"steps": steps[k]})
                    continue
                fd2, ad2, rb2, mag2 = self._point(d, small, plus, minus)
                if not np.isfinite(fd2):
                    out[k] = c.model_copy(update={"steps": steps[k]})
                    continue
                # The truncation error at the smaller step is at most the change of FD between the two steps; the
                # direction is judged again there, resolution included (a swamped smaller step rescues nothing).
                again = self._direction_check(c.direction, c.scope, fd2, ad2, rb2, abs(prev[k] - fd2), mag2,
                                              steps=steps[k], step=small)
                steps[k] = again.steps
                if again.status == "agree":
                    out[k] = again
                    continue
                settled = abs(prev[k] - fd2) <= 0.05 * max(abs(prev[k]), abs(fd2)) + 3 * rb2
                if settled or rb2 >= 0.25 * max(abs(fd2), abs(ad2)):
                    # FD settled away from AD, or rounding swamps the smaller step: the judgement at t stands
                    out[k] = c.model_copy(update={"steps": steps[k]})
                    continue
                prev[k] = fd2
                still.append(k)
            active = still
        for k in active:  # FD still moving at t/100: unresolved
            out[k] = todo[k][1].model_copy(update={"steps": steps[k], "status": "unresolved", "agree": False,
                                                    "ratio": None})
        return out

    def _hidden_lanes(self, d0: dict[str, np.ndarray], t: float, trunc_rel: float, mag: float,
                      band: float) -> list[DirectionCheck]:
        """Vector lanes too small to show in a combined direction (x around 15, y around 0.05): an error there
        hides below the noise of the large lanes, so such a lane gets a direction of its own. 2 evaluations per
        hidden lane, only for vector-typed parameters with mixed scales."""
        tol_rel = (3 * band + REL_SLACK * mag) / max(mag, 1e-300)
        out = []
        for p in self.params:
            if p.value.ndim < 2 or p.value.shape[-1] < 2 or p.key not in d0:
                continue
            terms = np.abs(p.grad.reshape(p.value.shape) * d0[p.key])
            for j in range(p.value.shape[-1]):
                lane_mag = float(np.sum(terms[..., j]))
                share = lane_mag / max(mag, 1e-300)
                if lane_mag == 0.0 or share >= 20 * tol_rel:
                    continue
                d = np.zeros_like(d0[p.key])
                d[..., j] = d0[p.key][..., j]
                for step in (t, 10 * t, 100 * t):
                    evs = self._run(_pair({p.key: d}, step))
                    if _first_error(evs):
                        break
                    fd, ad, rb, m = self._point({p.key: d}, step, evs[0], evs[1])
                    if _resolvable(SweepPoint(step=step, fd=fd, ad=ad, rounding_band=rb)):
                        out.append(self._direction_check(0, f"{p.name}[lane {j}]", fd, ad, rb,
                                                         trunc_rel * (step / t) ** 2 * max(abs(fd), m), m))
                        break
                else:
                    # Even at 100x the step the objective does not resolve this lane: its effect is below the
                    # objective's float rounding, so FD has nothing to say about it (recorded, not failed).
                    out.append(DirectionCheck(direction=0, scope=f"{p.name}[lane {j}]", step=step, ad=ad, fd=fd,
                                              band=3 * rb, rounding_band=rb, status="unresolved", agree=False))
        return out

    def check_at(self, step: float, trunc_rel: float) -> FDReport:
        """Directions at a step a sweep already chose at another point of the same program (a second training
        iteration): no sweep of its own, the truncation error carried over relative to the size of the terms,
        the rounding band measured here. Costs 2 evaluations per direction."""
        dirs = directions(self.params, self.n_directions, self.seed)
        self._step = step
        evs = self._run([x for d in dirs for x in _pair(d, step)])
        err = _first_error(evs)
        if err:
            return FDReport(verdict="inconclusive", reason=f"an FD evaluation failed: {err}", evaluations=self.evaluations)
        checks, points = [], []
        for k, d in enumerate(dirs):
            fd, ad, rb, mag = self._point(d, step, evs[2 * k], evs[2 * k + 1])
            if not np.isfinite(fd):
                return FDReport(verdict="inconclusive", reason="the objective is not finite near the parameters",
                                evaluations=self.evaluations)
            points.append((fd, ad, rb, mag))
            checks.append(self._direction_check(k, "all", fd, ad, rb, trunc_rel * max(abs(fd), mag), mag))
        all_zero_ad = all(not np.any(p.grad) for p in self.params)
        if all(fd == 0.0 for fd, *_ in points):
            if all_zero_ad:
                return FDReport(verdict="agree", flat=True, step=step, noise_band=0.0, directions=checks,
                                evaluations=self.evaluations,
                                reason="AD gradient is exactly zero and the objective does not move at this step")
            return FDReport(verdict="inconclusive", unreached=True, directions=checks, evaluations=self.evaluations,
                            reason=f"the objective did not change at all at step {step:g} while AD·v is nonzero: the "
                                   "perturbation did not reach the objective, or it is piecewise constant here")
        if not any(abs(fd) > 4 * rb or mag > 4 * rb for fd, ad, rb, mag in points):
            return FDReport(verdict="inconclusive", directions=checks, evaluations=self.evaluations, unresolvable=True,
                            reason="FD cannot resolve this objective at this iteration: its float rounding is "
                                   "comparable to its change at the chosen step")
        checks = self._confirm(dirs, checks, step)
        verdict = _vote(checks)
        report = FDReport(verdict=verdict, step=step, noise_band=max(c.rounding_band + c.truncation for c in checks),
                          directions=checks, trunc_rel=trunc_rel, unresolvable=verdict == "inconclusive",
                          reason=_UNRESOLVED if verdict == "inconclusive" else "")
        _ratios(report, checks)
        report.evaluations = self.evaluations
        return report

    def _size(self) -> int:
        return sum(p.value.size for p in self.params)

    def _sparse_at_kinks(self, t: float) -> list[ElementCheck]:
        """Per-element central differences at step t over every entry (small parameter sets only)."""
        items = [(p, idx) for p in self.params for idx in range(p.value.size)]
        batch = []
        for p, idx in items:
            e = np.zeros(p.value.size)
            e[idx] = p.scale_at(idx)
            batch += _pair({p.key: e.reshape(p.value.shape)}, t)
        evs = self._run(batch)
        out = []
        for j, (p, idx) in enumerate(items):
            plus, minus = evs[2 * j], evs[2 * j + 1]
            if plus.error or minus.error:
                return []
            e = np.zeros(p.value.size)
            e[idx] = p.scale_at(idx)
            fd, ad, rb, mag = self._point({p.key: e.reshape(p.value.shape)}, t, plus, minus)
            agree = bool(abs(ad - fd) <= 3 * rb + 0.02 * max(abs(fd), abs(ad), mag) + 1e-30)
            status: Status = "unresolved" if rb >= 0.25 * max(abs(fd), abs(ad)) else ("agree" if agree else "disagree")
            out.append(ElementCheck(param=p.name, index=[int(i) for i in np.unravel_index(idx, p.value.shape)],
                                    ad=ad, fd=fd, agree=status == "agree", status=status))
        return out

    def _direction_check(self, k: int, scope: str, fd: float, ad: float, rounding: float, truncation: float,
                         mag: float = 0.0, steps: list[SweepPoint] | None = None,
                         step: float | None = None) -> DirectionCheck:
        """Judge one direction at the current step: unresolved when the objective's rounding is comparable to
        the signal, or when an agreement would be within a band of a quarter of the signal or more (an AD 30% off
        would "agree" too); otherwise agree exactly when |ad - fd| is within the band reported with it."""
        noise = rounding + truncation
        band = 3 * noise + REL_SLACK * max(abs(fd), abs(ad), mag)
        signal = max(abs(fd), abs(ad))
        status: Status
        if not np.isfinite(ad):
            status = "disagree"
        elif rounding >= 0.25 * signal:
            status = "unresolved"
        elif abs(ad - fd) > band:
            status = "disagree"
        else:
            # A band of a quarter of the signal or more cannot tell AD from 1.3×AD: agreement within it is no
            # evidence (the same bar as rounding's).
            status = "agree" if band < 0.25 * signal else "unresolved"
        ratio = ad / fd if status != "unresolved" and abs(fd) > 3 * noise and fd != 0 else None
        t = self._step if step is None else step
        here = SweepPoint(step=t, fd=fd, ad=ad, rounding_band=rounding, magnitude=mag)
        own = [*steps, here] if steps is not None and not any(p.step == t for p in steps) else (steps or [here])
        return DirectionCheck(direction=k, scope=scope, step=t, ad=ad, fd=fd, band=band, rounding_band=rounding,
                              truncation=truncation, ratio=ratio, status=status, agree=status == "agree", steps=own)

    def _per_param(self, d0, t, trunc_rel) -> list[DirectionCheck]:
        batch, keys = [], []
        for p in self.params[:8]:
            restricted = {p.key: d0[p.key]}
            batch += _pair(restricted, t)
            keys.append(p)
        evs = self._run(batch)
        out = []
        for j, p in enumerate(keys):
            plus, minus = evs[2 * j], evs[2 * j + 1]
            if plus.error or minus.error:
                continue
            fd, ad, rb, mag = self._point({p.key: d0[p.key]}, t, plus, minus)
            out.append(self._direction_check(0, p.name, fd, ad, rb, trunc_rel * max(abs(fd), mag), mag))
        return out

    def _elements(self, t, trunc_rel, limit, per_param) -> list[ElementCheck]:
        """Entries of the (first failing) parameter compared one by one at step t: every entry of a small one,
        else a bounded sample (`_sample`). 2 evaluations per entry."""
        failing = {c.scope for c in per_param if not c.agree}
        targets = [p for p in self.params if not failing or p.name in failing][:1]
        out = []
        for p in targets:
            flat_grad = p.grad.reshape(-1)
            picks = _sample(flat_grad, limit, self.seed)
            batch = []
            for idx, _ in picks:
                e = np.zeros_like(flat_grad)
                e[idx] = p.scale_at(idx)
                batch += _pair({p.key: e.reshape(p.grad.shape)}, t)
            evs = self._run(batch)
            judged: list[tuple[int, Pick, dict[str, np.ndarray], DirectionCheck]] = []
            for j, (idx, pick) in enumerate(picks):
                plus, minus = evs[2 * j], evs[2 * j + 1]
                if plus.error or minus.error:
                    continue
                e = np.zeros_like(flat_grad)
                e[idx] = p.scale_at(idx)
                d = {p.key: e.reshape(p.grad.shape)}
                fd, ad, rb, mag = self._point(d, t, plus, minus)
                judged.append((idx, pick, d, self._direction_check(0, p.name, fd, ad, rb,
                                                                   trunc_rel * max(abs(fd), mag), mag, step=t)))
            # An entry at a kink or on a steep gate disagrees at t as a wrong one does; followed down in step, its
            # FD keeps moving (unresolved) where a wrong entry's settles away from AD. The first
            # ELEMENTS_FOLLOWED disagreeing entries are followed, together (one request per step).
            follow = [k for k, (_, _, _, c) in enumerate(judged) if c.status == "disagree"][:ELEMENTS_FOLLOWED]
            for k, c in zip(follow, self._follow_many([(judged[k][2], judged[k][3]) for k in follow], t)):
                judged[k] = (*judged[k][:3], c)
            for idx, pick, _, c in judged:
                out.append(ElementCheck(param=p.name, index=[int(i) for i in np.unravel_index(idx, p.grad.shape)],
                                        ad=c.ad, fd=c.fd, agree=c.status == "agree", status=c.status, pick=pick))
        return out


def _sample(flat_grad: np.ndarray, limit: int, seed: int) -> list[tuple[int, Pick]]:
    """Which entries to compare one by one, at most `limit`: all of them when there are no more; else the
    quarter with the smallest |AD| (a zeroed or clamped subset sits there), the quarter with the largest, and the
    rest a seeded uniform draw of the others, which alone estimates what share of entries disagrees. Depends
    only on the gradient and the seed, so the same program picks the same entries on every run."""
    n = flat_grad.size
    if n <= limit:
        return [(i, "all") for i in range(n)]
    order = np.argsort(np.abs(flat_grad), kind="stable")
    k = limit // 4
    picked: dict[int, Pick] = {int(i): "smallest" for i in order[:k]}
    picked.update({int(i): "largest" for i in order[::-1][:k] if int(i) not in picked})
    rest = np.array([i for i in range(n) if i not in picked])
    for i in np.random.default_rng(seed).choice(rest, size=min(limit - len(picked), rest.size), replace=False):
        picked[int(i)] = "random"
    return sorted(picked.items())


_UNRESOLVED = ("no direction resolves the objective at the chosen step: in each, the float rounding of the objective "
               "(or the FD band) is as large as the change being measured, so none can vote")


def _vote(checks: list[DirectionCheck]) -> str:
    """Only resolved directions vote: any resolved disagreement is a disagreement; agreement needs at least one
    resolved direction; none resolved is no verdict."""
    if any(c.status == "disagree" for c in checks):
        return "disagree"
    return "agree" if any(c.status == "agree" for c in checks) else "inconclusive"


def _ratios(report: FDReport, checks: list[DirectionCheck]) -> None:
    ratios = [c.ratio for c in checks if c.ratio is not None and np.isfinite(c.ratio)]
    if ratios:
        mean = float(np.mean(ratios))
        report.ratio_mean = mean
        report.ratio_spread = float((max(ratios) - min(ratios)) / max(abs(mean), 1e-300))


def _converged(sweep: list[SweepPoint]) -> tuple[float, int] | None:
    """(|FD difference|, index of the larger step) of the neighbouring resolvable steps FD converges at: the
    closest pair, if it agrees within 5% of FD (or the pair's rounding); None when the sweep does not converge.
    Judged on FD's own values, never on AD's: a huge AD·v (chaos, an exploding adjoint) must not make a
    wandering FD look settled."""
    pairs = [(abs(a.fd - b.fd), i, a, b) for i, (a, b) in enumerate(itertools.pairwise(sweep))
             if _resolvable(a) and _resolvable(b)]
    if not pairs:
        return None
    d_min, i_min, a, b = min(pairs, key=lambda x: (x[0], x[1]))
    if d_min <= 0.05 * max(abs(a.fd), abs(b.fd)) + 3 * max(a.rounding_band, b.rounding_band):
        return d_min, i_min
    return None


def _resolvable(s: SweepPoint) -> bool:
    """The change of the objective at this step rises clearly above its rounding."""
    return s.rounding_band < 0.25 * max(abs(s.fd), abs(s.ad), 1e-300)


def _objective(e: Evaluation) -> float:
    """The objective of an evaluation that `_first_error` let through (it stops at a missing one)."""
    if e.objective is None:
        raise ValueError("an evaluation without an objective reached the FD arithmetic")
    return e.objective


def _first_error(evs: list[Evaluation]) -> str | None:
    for e in evs:
        if e.error:
            return e.error
        if e.objective is None:
            return "no objective was recorded"
    return None


def classify(report: FDReport, *, grads: list[np.ndarray], backward_calls: int,
             stale: dict[str, float]) -> tuple[Signature, float | None, str]:
    """Signature of a check: (signature, factor, explanation)."""
    nonfinite = sum(int(np.count_nonzero(~np.isfinite(g))) for g in grads)
    if nonfinite:
        return Signature.NAN_INF, None, f"{nonfinite} gradient entries are NaN or inf"
    if report.flat:
        return Signature.ZERO, None, report.reason
    if report.verdict == "sparse":
        return Signature.SPARSE_SUBSET, None, report.reason
    if report.verdict == "inconclusive":
        return Signature.INCONCLUSIVE, None, report.reason
    if report.verdict == "agree":
        return Signature.CORRECT, None, "AD matches FD within the noise band in every direction"
    if all(not np.any(g) for g in grads):
        return Signature.ZERO, None, "the gradient the optimizer consumes is exactly zero, FD is not"
    cut = [c.scope for c in report.per_param if not c.agree and c.ad == 0.0 and c.fd != 0.0]
    if cut:
        return Signature.ZERO, None, (f"the gradient of {', '.join(cut)} is exactly zero while FD is not (the "
                                      "others may be wrong too: fix the cut chain first, then check again)")
    if backward_calls > 1:
        return Signature.TRUNCATION, None, (f"{backward_calls} backward calls feed one update: each tape sees part "
                                            "of the horizon, so the summed per-window gradients miss the coupling "
                                            "between windows")
    if stale:
        names = ", ".join(f"{k} (max |grad| {v:.3g})" for k, v in stale.items())
        return Signature.GROWS_ACROSS_ITERATIONS, None, (f"the parameter gradient was already nonzero before this "
                                                         f"iteration's backward: {names}; gradients accumulate "
                                                         "across iterations")
    # A real factor bug (duplicate accumulation, sum-vs-mean seed) is exact to float precision in every
    # direction; a partial chain cut can look proportional to a few percent, so the bar is tight.
    n_entries = sum(g.size for g in grads)
    if report.ratio_mean is not None and report.ratio_spread is not None and report.ratio_spread < 5e-3 and len(
            [c for c in report.directions if c.ratio is not None]) >= 2 and (
            n_entries >= 2 or _small_factor(report.ratio_mean)):
        # A single entry is "proportional" whatever its error: only a small clean factor (-1, 2, 1/2, ... 16)
        # then says something (a sign, a double accumulation). From two entries on, a ratio constant over
        # independent directions pins AD = c·FD (a generic wrong gradient is not parallel to the true one), so
        # any clean factor counts, N of a mean seeded by hand included, however many directions were drawn.
        # The factor must be clean (an integer or 1/integer): a partial cut can look proportional at 0.978.
        f = _snap(report.ratio_mean)
        clean = f != report.ratio_mean or float(f).is_integer()
        if f != 1.0 and clean:
            return Signature.EXACT_FACTOR, f, (f"AD/FD = {report.ratio_mean:.6g} in every direction (spread "
                                               f"{report.ratio_spread:.2%})")
    lanes = _wrong_lanes(report.elements)
    if lanes:
        return Signature.SUBTLY_WRONG, None, lanes
    subset = _wrong_subset(report.elements)
    if subset:
        return Signature.SPARSE_SUBSET, None, subset
    return Signature.SUBTLY_WRONG, None, "AD and FD disagree beyond the noise band with no constant ratio"


def _wrong_lanes(elements: list[ElementCheck]) -> str | None:
    """The entries that disagree are exactly whole lanes of a vector-typed parameter (every checked entry of
    lane 2 wrong, every other right): a structural error in that component's formula, not a data-dependent
    subset, so it stays `subtly_wrong`, with the lanes named (None when the pattern is anything else)."""
    resolved = [e for e in elements if e.status != "unresolved" and len(e.index) >= 2]
    if len(resolved) < len(elements) or not resolved:
        return None
    bad_lanes = {(e.param, e.index[-1]) for e in resolved if e.status == "disagree"}
    if not bad_lanes or any(((e.param, e.index[-1]) in bad_lanes) != (e.status == "disagree") for e in resolved):
        return None
    named = ", ".join(f"lane {j} of {name}" for name, j in sorted(bad_lanes))
    return (f"AD and FD disagree with no constant ratio, in {named} only: every checked entry of it disagrees and "
            "every other entry matches, so the formula of that vector component (or its adjoint) is wrong")


def _wrong_subset(elements: list[ElementCheck]) -> str | None:
    """The entry-by-entry comparison says a subset is wrong (None otherwise): some resolved entries disagree
    while most of the uniformly drawn ones (every entry, for a small parameter) match FD; when nearly every
    drawn entry disagrees, the whole gradient is wrong, not a subset."""
    resolved = [e for e in elements if e.status != "unresolved"]
    bad = [e for e in resolved if e.status == "disagree"]
    drawn = [e for e in resolved if e.pick in ("all", "random")]
    good = sum(e.status == "agree" for e in drawn)
    if not bad or good < 2 or good < 0.5 * len(drawn):
        return None
    # "Exactly right" and "wrong" must be two separate groups: an error that grows smoothly across the entries
    # (a reused buffer: 0.4%, 2%, 5%) only crosses the band somewhere and is wrong everywhere, not on a subset.
    worst_good = max(_rel_err(e) for e in resolved if e.status == "agree")
    if 10 * worst_good > min(_rel_err(e) for e in bad):
        return None
    shown = ", ".join(f"{e.param}{e.index} (AD {e.ad:.3g}, FD {e.fd:.3g})" for e in bad[:4])
    zeros = sum(e.ad == 0.0 for e in bad)
    return (f"{len(bad)} of {len(resolved)} entries compared one by one disagree ({shown}{', ...' if len(bad) > 4 else ''})"
            f"; {good} of {len(drawn)} drawn at random match FD: the gradient is wrong on a subset of entries"
            f"{f' ({zeros} of them exactly zero)' if zeros else ''} (a clamp, mask or branch that drops their adjoint, "
            "a counter or index that skips them in the backward, an in-place write at those entries)")


def _rel_err(e: ElementCheck) -> float:
    return abs(e.ad - e.fd) / max(abs(e.ad), abs(e.fd), 1e-300)


def _small_factor(x: float) -> bool:
    """x is ±k or ±1/k for an integer k ≤ 16, to 0.1%."""
    for y in (abs(x), 1.0 / abs(x) if x else 0.0):
        k = round(y)
        if 1 <= k <= 16 and abs(y - k) <= 1e-3 * k:
            return True
    return False


def _snap(x: float) -> float:
    for cand in (round(x), 1.0 / round(1.0 / x) if abs(x) > 1e-12 and round(1.0 / x) != 0 else None):
        if cand and abs(x - cand) <= 0.01 * abs(cand):
            return float(cand)
    return float(x)
