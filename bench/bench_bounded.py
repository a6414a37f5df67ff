"""Bounded work: how long warpgrad takes to stop what must not run on (a hostile regex, a tool past its timeout,
a cancelled call, a script that hangs or leaves detached children).

Run: `python bench/bench_bounded.py [--reps 3] [--json]`

The tests of these behaviours assert only generous hang-catchers (a loaded machine must not trip them); the
timing targets live here, each beside the time the unbounded behaviour would take. Prints, per case, the median
and the worst of `--reps` runs in seconds, the target and whether every run met it; exits 1 when one did not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from warpgrad.tools.forked_call import ToolCancelled, ToolTimeout, run_bounded
from warpgrad.tools.losses import parse_losses
from warpgrad.tools.metric import MetricSpec
from warpgrad.tools.run_script import RunScriptArgs, run_script


class Case(BaseModel):
    name: str
    target_s: float
    unbounded: str
    """What the time would be without the bound (why the target means something)."""
    times_s: list[float] = []

    @property
    def met(self) -> bool:
        return bool(self.times_s) and max(self.times_s) < self.target_s


def _hostile_losses() -> None:
    hostile = "\n".join(["cost" + " " * 3000 + "?", "objective:" + "\t" * 5000 + "nope"] * 50)
    assert [(p.iteration, p.value) for p in parse_losses(hostile + "\nstep 7 cost = 0.25\n")] == [(7, 0.25)]


def _metric_timeout() -> None:
    values, why = MetricSpec(regex="(a|aa)+$").scan("val aa\n" + ("a" * 40 + "b\n") * 5)
    assert values == [] and why and "backtracks" in why


def _bounded_timeout() -> None:
    try:
        run_bounded(lambda: time.sleep(30), 0.5)
    except ToolTimeout:
        return
    raise AssertionError("run_bounded did not time out")


def _bounded_cancel() -> None:
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    try:
        run_bounded(lambda: time.sleep(30), 30, cancel)
    except ToolCancelled:
        return
    raise AssertionError("run_bounded was not cancelled")


def _script(body: str, timeout_s: float, expect_timeout: bool) -> Callable[[], None]:
    def go() -> None:
        with tempfile.TemporaryDirectory(prefix="warpgrad-bench-bounded-") as d:
            (Path(d) / "s.py").write_text(body, encoding="utf-8")
            r = run_script(RunScriptArgs(script="s.py", record=False, timeout_s=timeout_s), Path(d))
            assert r.timed_out == expect_timeout, r

    return go


CASES: list[tuple[Case, Callable[[], None]]] = [
    (Case(name="loss lines built to backtrack (parse_losses)", target_s=5.0, unbounded="polynomial backtracking"),
     _hostile_losses),
    (Case(name="metric regex built to backtrack (MetricSpec.scan)", target_s=10.0,
          unbounded="exponential backtracking"),
     _metric_timeout),
    (Case(name="tool past a 0.5 s timeout (run_bounded)", target_s=3.0, unbounded="30 s sleep"), _bounded_timeout),
    (Case(name="call cancelled at 0.3 s (run_bounded)", target_s=1.2, unbounded="30 s sleep"), _bounded_cancel),
    (Case(name="script leaving a detached 61 s child (run_script)", target_s=8.0, unbounded="61 s"),
     _script("import subprocess\nsubprocess.Popen(['sleep', '61.0931'], start_new_session=True)\n", 10, False)),
    (Case(name="hanging script and child, timeout 3 s (run_script)", target_s=20.0, unbounded="60 s"),
     _script("import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])"
             "\ntime.sleep(60)\n", 3, True)),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    for case, fn in CASES:
        for _ in range(a.reps):
            t0 = time.monotonic()
            fn()
            case.times_s.append(round(time.monotonic() - t0, 3))
    if a.json:
        print(json.dumps([dict(c.model_dump(), met=c.met) for c, _ in CASES], indent=2))
    else:
        print("| case | median s | worst s | target s | unbounded | met |")
        print("|---|---|---|---|---|---|")
        for c, _ in CASES:
            print(f"| {c.name} | {statistics.median(c.times_s):.2f} | {max(c.times_s):.2f} | {c.target_s:g} | "
                  f"{c.unbounded} | {'yes' if c.met else 'NO'} |")
    return 0 if all(c.met for c, _ in CASES) else 1


if __name__ == "__main__":
    sys.exit(main())
