"""Does a run of the workflow improve on another? The quantity a run is judged by (the named metric, else its
loss) and the comparison of two runs, shared by the rules that compare runs (G010, G013)."""

from __future__ import annotations

import itertools
import math

from pydantic import BaseModel

from ..ledger import LedgerRecord
from ..metric import MetricSpec
from ..records import Comparison, RunEvent, RunPayload


class _Quantity(BaseModel):
    label: str
    values: list[float]
    badness_sign: float = 1.0
    metric: MetricSpec | None = None

    def bad(self, v: float) -> float:
        return self.metric.badness(v) if self.metric is not None else self.badness_sign * v


def _quantity(rv: RunPayload, metric: MetricSpec | None) -> _Quantity:
    """The values a run is judged by: the named metric (re-read from the recorded output when the run was
    made before the metric was named), else its loss trajectory (or final loss)."""
    if metric is not None:
        vals = rv.metric_values if rv.metric == metric else metric.values(rv.stdout_tail)
        return _Quantity(label=metric.label(), values=vals, metric=metric)
    traj = rv.trajectory()
    if rv.final_loss is not None:  # the run's own final value wins over the last parsed point
        traj = [*traj[:-1], rv.final_loss]
    sign = -1.0 if rv.objective_direction == "max" else 1.0
    return _Quantity(label="final loss" + (" (higher is better)" if sign < 0 else ""), values=traj,
                     badness_sign=sign)


def _descends(q: _Quantity, *, min_drop: float, max_wrong_way: float) -> bool:
    """The run's own trajectory improves steadily: every value finite, the last better than the first by more than
    `min_drop` (relative), and fewer than `max_wrong_way` of its steps the wrong way."""
    v = q.values
    if len(v) < 2 or not all(math.isfinite(x) for x in v):
        return False
    first, last = q.bad(v[0]), q.bad(v[-1])
    if not last < first - min_drop * abs(first):
        return False
    wrong_way = sum(1 for a, b in itertools.pairwise(v) if q.bad(b) > q.bad(a))
    return len(v) < 4 or wrong_way < max_wrong_way * (len(v) - 1)


def _no_symptom(before: _Quantity) -> bool:
    """The run before showed no symptom: it improved (the bounds `losses.summarize` calls "improving": over 5%, under
    40% of its steps the wrong way)."""
    return _descends(before, min_drop=0.05, max_wrong_way=0.4)


def _still_descends(after: _Quantity) -> bool:
    """The rerun descends: nearly every step down (under a tenth the wrong way), by however little. No size is
    asked: the learning rate was tuned to the wrong gradient, so a right one k times smaller descends about k
    times more slowly (drone_hover_gains' factor 8: 1.683 -> 1.622 in 20 steps)."""
    return _descends(after, min_drop=0.0, max_wrong_way=0.1)


def objective_improves(before: LedgerRecord, after: LedgerRecord, *,
                       no_symptom_ok: bool = False) -> tuple[bool, str, Comparison | None]:
    """Does the workflow run `after` improve on `before`? The verdict, why in words, and the comparison.

    The quantity is the metric `after` names (`run_script(metric=...)`), else the loss. Lower is better
    unless the metric says otherwise (or the run says `objective_direction: "max"`). The run before must
    show the quantity at all (G010: a run with nothing parsed compares nothing). A finite final value
    improves on a non-finite one only when the later run's own trajectory also improves (the skill's rule:
    an exploding optimisation must now improve, not merely avoid NaN).

    `no_symptom_ok` (G010, a fix): when the whole run before showed no symptom (it ran to its end and descended
    steadily), a rerun that descends at nearly every step counts even if it ends higher: a wrong gradient can descend
    faster than the right one at hyper-parameters tuned to it, and the fix is proven by the checks, not the run;
    the comparison says so. Never for a variant run (G013, not_a_gradient_bug), which must improve.
    """
    if not isinstance(before.event, RunEvent) or not isinstance(after.event, RunEvent):
        return False, "a run record does not have the shape of a run_script result", None
    bv, av = before.event.payload, after.event.payload
    if av.failed():
        return False, f"the rerun (record {after.seq}) failed", None
    q_after = _quantity(av, av.metric)
    q_before = _quantity(bv, av.metric)
    if not q_after.values:
        what = f"no value of the {q_after.label}" if av.metric else "no final_loss or loss_trajectory"
        return False, (f"the rerun (record {after.seq}) reports {what}; if the script prints a metric rather than a "
                       "loss, rerun it with run_script(metric=NAME or metric_regex=..., metric_direction=...)"), None
    if not q_before.values:
        what = f"no value of the {q_before.label}" if av.metric else "no loss that could be parsed"
        return False, (f"the run before the patch (record {before.seq}) shows {what}, so there is nothing to compare "
                       "the rerun with: name the quantity the script prints (run_script metric=...) or run the "
                       "unpatched workflow again (undo, run, redo)"), None
    where, full = "", q_after
    if bv.cut_short_at is not None and len(q_after.values) > len(q_before.values):
        # The run before was stopped once its trend was read (diagnose): compare at the same printed point.
        q_after = q_after.model_copy(update={"values": q_after.values[:len(q_before.values)]})
        where = f" at printed point {len(q_before.values)} (where the run before was cut short)"
    a, b = q_after.values[-1], q_before.values[-1]
    cmp = Comparison(quantity=q_after.label + where, before_seq=before.seq, after_seq=after.seq, before=b, after=a,
                     verdict="")
    if not math.isfinite(a):
        return False, f"the rerun (record {after.seq}) still ends at a non-finite objective ({q_after.label})", None
    if not any(math.isfinite(x) for x in q_before.values):
        return False, (f"every value of the {q_before.label} in the run before the patch (record {before.seq}) is "
                       "non-finite: nothing was measured to compare with; run the unpatched workflow so it "
                       "prints at least one finite value (fewer iterations), or name a metric it does print"), None
    if not math.isfinite(b) or bv.failed():
        traj = q_after.values
        if len(traj) >= 2 and all(math.isfinite(v) for v in traj) and q_after.bad(traj[-1]) < q_after.bad(traj[0]):
            cmp.verdict = "finite and improving where the run before ended non-finite or failed"
            return True, cmp.verdict, cmp
        return False, (f"the run before (record {before.seq}) was non-finite or failed, but the rerun "
                       f"(record {after.seq}) does not show its objective improving over its own trajectory"), None
    if q_after.bad(a) < q_after.bad(b):
        cmp.verdict = f"{q_after.label} improved"
        return True, cmp.verdict, cmp
    if full is not q_after:
        done = _beats_the_best_of_a_cut_short_run(full, q_before, before.seq, after.seq)
        if done is not None:
            return True, done.verdict, done
    elif no_symptom_ok and bv.cut_short_at is None and _no_symptom(q_before) and _still_descends(q_after):
        cmp.quantity = f"{q_after.label}, each run over its own trajectory"
        cmp.verdict = (f"the run before showed no symptom ({q_before.values[0]!r} -> {b!r}, descending steadily to its "
                       f"end) and the rerun descends at nearly every step ({q_after.values[0]!r} -> {a!r}); it ends higher: "
                       "the wrong gradient descended faster at these hyper-parameters, which were tuned to it")
        return True, cmp.verdict, cmp
    return False, (f"the rerun (record {after.seq}) ends at {a!r}, which does not improve on {b!r} "
                   f"(record {before.seq}) by the {q_after.label}"), None


def _beats_the_best_of_a_cut_short_run(after: _Quantity, before: _Quantity, before_seq: int,
                                       after_seq: int) -> Comparison | None:
    """A right fix may descend more slowly at first than a wrong gradient that overshoots: where the run before was
    cut short, the rerun also counts when it ends better than the best value the run before ever reached (the
    buggy run was stopped, so where it would have ended is unknown; its best is all it showed)."""
    finite = [x for x in before.values if math.isfinite(x)]
    end = after.values[-1]
    if not finite or not math.isfinite(end):
        return None
    best = min(finite, key=after.bad)
    if after.bad(end) >= after.bad(best):
        return None
    return Comparison(quantity=f"{after.label}: the rerun's end against the best of the run before (cut short at "
                      f"printed point {len(before.values)})", before_seq=before_seq, after_seq=after_seq, before=best,
                      after=end, verdict=f"{after.label} ends below the best the run before reached before it was "
                      "cut short")
