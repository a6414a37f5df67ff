"""What a one-shot `diagnose` no longer pays for (issue 25): a per-launch check per launch *class* across the run's
tapes (not per launch, not per tape), checks and tracker runs stopped once the FD check says the gradient is
right, and the harness run cancel that stops them. A broken program still localizes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from warpgrad.tools.child_process import run_harness
from warpgrad.tools.diagnose import _CHECKS_NOT_NEEDED, DiagnoseArgs, _Stages, _tape_of_iteration
from warpgrad.tools.gradcheck import GradcheckResult
from warpgrad.tools.harness.protocol import (
    LOCALIZE_LISTENER,
    TAPE_ITERATIONS_LISTENER,
    CaptureConfig,
    CaptureOptions,
    CaptureResult,
    HarnessResult,
    LocalizeOptions,
    RunConfig,
    TapeInspectOptions,
)
from warpgrad.tools.quickchecks.base import Finding
from warpgrad.tools.tape import describe_inspection
from warpgrad.tools.worker import worker_pool

T = 30  # launches of `step` per iteration, from two launch sites

# One kernel launched T times per iteration from two lines (same dtypes, shapes and dim: one launch class), a
# loss kernel whose custom adjoint is wrong on purpose (3x instead of 2x), and an update reading the gradient.
REPEATED_PY = r"""
import numpy as np
import warp as wp

N, T = 8, __T__


@wp.func
def sq(x: float):
    return x * x


@wp.func_grad(sq)
def adj_sq(x: float, adj_ret: float):
    wp.adjoint[x] += 3.0 * x * adj_ret  # wrong on purpose: d(x*x)/dx is 2x


@wp.kernel
def step(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 0.9 + 0.01


@wp.kernel
def energy(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, sq(x[i]))


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


p = wp.array(np.linspace(0.1, 0.8, N, dtype=np.float32), dtype=float, requires_grad=True)
for it in range(3):
    xs = [p] + [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(T)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(T // 2):
            wp.launch(step, dim=N, inputs=[xs[t]], outputs=[xs[t + 1]])
        for t in range(T // 2, T):
            wp.launch(step, dim=N, inputs=[xs[t]], outputs=[xs[t + 1]])
        wp.launch(energy, dim=N, inputs=[xs[T]], outputs=[loss])
    tape.backward(loss)
    print(f"iteration {it} loss {loss.numpy()[0]:.6f}")
    wp.launch(sgd, dim=N, inputs=[p, p.grad, 0.1])
    tape.zero()
"""


def _write(ws: Path) -> Path:
    path = ws / "train.py"
    path.write_text(REPEATED_PY.replace("__T__", str(T)), encoding="utf-8")
    return path


def _tape_run(ws: Path, stop_file: Path | None = None):
    """The tape run diagnose makes (`_Stages.tape_run`'s configuration), optionally with a stop file."""
    cfg = CaptureConfig(workspace=str(ws), script=str(ws / "train.py"), outdir=str(ws), capture=CaptureOptions(),
                        listeners=[TAPE_ITERATIONS_LISTENER, LOCALIZE_LISTENER],
                        tape_inspect=TapeInspectOptions(max_tapes=4),
                        localize=LocalizeOptions(gradcheck=True, nan=True,
                                                 stop_file=str(stop_file) if stop_file else None))
    out = run_harness(cfg, CaptureResult, cwd=ws, timeout_s=300)
    assert out.result is not None, out.error
    return out


def _tape(ws: Path, out, iteration: int):
    data = _tape_of_iteration(out.result, iteration)
    assert data is not None, f"the tape run did not describe iteration {iteration}"
    return describe_inspection(out.process, data, ws, ws / "train.py", [])


@pytest.mark.warp
def test_one_check_per_launch_class_stands_for_its_launches_and_a_wrong_adjoint_still_fails(tmp_path):
    _write(tmp_path)
    out = _tape_run(tmp_path)
    first, later = _tape(tmp_path, out, 0), _tape(tmp_path, out, 1)
    for tape, at in ((first, None), (later, 0)):
        assert tape.ok and len(tape.tapes) == 1
        checks = {c.kernel: c for c in tape.tapes[0].gradcheck}
        # Thirty launches from two lines: one check, which says what it stands for.
        assert sorted(checks) == ["energy", "step"], tape.tapes[0].gradcheck
        assert checks["step"].launches == T and checks["energy"].launches == 1
        assert checks["step"].passed is True
        # The wrong adjoint is found (on the later tape by the check made on the first one, which says so).
        assert checks["energy"].passed is False and checks["energy"].status == "failed"
        assert {c.checked_at_iteration for c in checks.values()} == {at}
        assert tape.tapes[0].gradcheck_not_run is None


@pytest.mark.warp
def test_a_written_stop_file_starts_no_check_and_the_tape_says_why(tmp_path):
    _write(tmp_path)
    stop = tmp_path / "stop"
    stop.write_text(_CHECKS_NOT_NEEDED, encoding="utf-8")
    out = _tape_run(tmp_path, stop)
    for it in (0, 1):
        tape = _tape(tmp_path, out, it)
        assert tape.ok and tape.tapes[0].launches  # the inspection itself is whole
        assert tape.tapes[0].gradcheck == []
        assert tape.tapes[0].gradcheck_not_run == _CHECKS_NOT_NEEDED


def _finding(code: str) -> Finding:
    return Finding(code=code, name="x", path="train.py", line=3, col=0, message="m", reference="r",
                   signatures=["subtly_wrong"], severity="warning", confidence="medium")


def test_a_matching_later_iteration_stops_the_checks_and_the_tracker_unless_a_rule_needs_it(tmp_path):
    passed = GradcheckResult(ok=True, mode="capture", script="train.py", passed=True)
    failed = GradcheckResult(ok=True, mode="capture", script="train.py", passed=False)

    st = _Stages(DiagnoseArgs(script="train.py"), tmp_path, None)
    st.tape_stop = tmp_path / "stop"
    st.res.findings, st.rules_done = [_finding("WG001")], True
    st.after_first_verdict(failed)
    assert not st.tape_stop.exists() and not st.tracker_cancel.is_set()
    st.after_first_verdict(passed)
    assert st.tape_stop.read_text(encoding="utf-8") == _CHECKS_NOT_NEEDED
    assert st.tracker_cancel.is_set()
    st.start_tracker()  # the main thread's start, after the verdict: it never starts
    assert st.tracker_future is None

    # A rule reports an overwrite the tracker can confirm: its records weigh in even with a verified gradient.
    st = _Stages(DiagnoseArgs(script="train.py"), tmp_path, None)
    st.res.findings, st.rules_done = [_finding("WG005")], True
    st.after_first_verdict(passed)
    assert not st.tracker_cancel.is_set()
    # Before the rules ran nothing is known about overwrites: the tracker is not stopped.
    st = _Stages(DiagnoseArgs(script="train.py"), tmp_path, None)
    st.after_first_verdict(passed)
    assert not st.tracker_cancel.is_set()


SLEEPER_PY = "import time\nprint('started', flush=True)\ntime.sleep(120)\n"


@pytest.mark.warp
@pytest.mark.parametrize("warm", [False, True])
def test_a_cancelled_harness_run_is_killed_at_once_and_says_so(tmp_path, warm):
    (tmp_path / "train.py").write_text(SLEEPER_PY, encoding="utf-8")
    cancel = threading.Event()
    timer = threading.Timer(3.0, cancel.set)
    cfg = RunConfig(workspace=str(tmp_path), script=str(tmp_path / "train.py"))
    t = time.monotonic()
    timer.start()
    try:
        if warm:
            with worker_pool() as pool:
                assert pool is not None
                out = run_harness(cfg, HarnessResult, cwd=tmp_path, timeout_s=100, cancel=cancel)
                assert pool.served == 1  # the warm worker's run was the one cancelled
        else:
            out = run_harness(cfg, HarnessResult, cwd=tmp_path, timeout_s=100, cancel=cancel)
    finally:
        timer.cancel()
    assert time.monotonic() - t < 30  # not the 100 s timeout, nor the script's 120 s
    assert out.process.cancelled and not out.process.timed_out and not out.process.ok
    assert "cancelled" in out.process.describe()


@pytest.mark.warp
@pytest.mark.parametrize(("args", "told"), [((), None), (("--report-taped",), True)])
def test_diagnose_is_told_the_later_verdict_as_it_will_read_it(tmp_path, args, told):
    """A pass withheld because the script reports another quantity than the seeded loss is no pass: diagnose,
    told it early, must not stop the tracker and the per-launch checks on it (`after_first_verdict`)."""
    import shutil

    from warpgrad.tools.gradcheck import CaptureRider, GradcheckArgs, check_capture

    shutil.copy(Path(__file__).parent / "fixtures" / "shapes" / "coarse_taped_fine_reported.py", tmp_path / "train.py")
    seen: list[bool | None] = []
    rider = CaptureRider(listeners=[], first_verdict=lambda gc: seen.append(gc.passed))
    r = check_capture(GradcheckArgs(script="train.py", args=list(args), record=False), tmp_path,
                      tmp_path / "train.py", rider)
    assert seen == [told], (seen, r.signature, r.reason)
    assert r.passed is told
