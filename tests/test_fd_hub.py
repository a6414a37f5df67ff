"""The FD hub: evaluations forked from one run of the script at the checked iteration's first perturbed use.

Each evaluation must be what a run from the start would have given (the same objective to the last bit, the same
perturbation applied), the hub must refuse to fork where a thread is alive, kill an evaluation at its own time
limit, and gradcheck must give the same numbers with the hub as without it.
"""

import json
from pathlib import Path

import numpy as np
import pytest
from programs import HEADER, VARIANTS, write_program

from warpgrad.tools.child_process import read_forked_session, run_harness
from warpgrad.tools.fd_hub import FdHub
from warpgrad.tools.gradcheck import HUB_ENV, GradcheckArgs, check
from warpgrad.tools.harness.protocol import (
    CaptureConfig,
    CaptureResult,
    FdConfig,
    FdOptions,
    FdResult,
    Perturbation,
    ServeEvaluation,
    ServeOptions,
)

pytestmark = pytest.mark.warp


def _capture(ws: Path) -> tuple[str, np.ndarray]:
    """The role of the program's one parameter at iteration 1, and its value there."""
    out = run_harness(CaptureConfig(workspace=str(ws), script=str(ws / "train.py"), outdir=str(ws)), CaptureResult,
                      cwd=ws)
    assert out.result is not None and out.result.capture is not None, out.process.stderr_tail
    p = out.result.capture.params[0]
    assert p.role is not None
    return p.role, np.load(p.value_file)


def _deltas(ws: Path, value: np.ndarray) -> list[list[Perturbation]]:
    """+d, -d and nothing: what an FD pair and the unperturbed rerun send."""
    d = np.random.default_rng(0).standard_normal(value.shape) * 1e-2
    out: list[list[Perturbation]] = []
    for k, delta in enumerate((d, -d, None)):
        if delta is None:
            out.append([])
            continue
        path = ws / f"delta_{k}.npy"
        np.save(path, delta)
        out.append([Perturbation(role="", delta=str(path))])
    return out


def _hub(ws: Path, roles: list[str], name: str = "hub.sock") -> FdHub:
    cfg = FdConfig(workspace=str(ws), script=str(ws / "train.py"), outdir=str(ws),
                   capture=FdOptions(iteration=1, serve=ServeOptions(socket=str(ws / name), roles=roles, jobs=2)))
    hub = FdHub(cfg, cwd=ws, timeout_s=120, device=None)
    hub.start()
    return hub


def _evaluation(ws: Path, k: int, perturb: list[Perturbation], timeout_s: float = 60) -> ServeEvaluation:
    outdir = ws / f"eval_{k}"
    outdir.mkdir()
    return ServeEvaluation(perturb=perturb, outdir=str(outdir), result=str(outdir / "result.json"),
                           stderr=str(outdir / "stderr.txt"), timeout_s=timeout_s)


def test_evaluations_forked_from_a_hub_equal_runs_from_the_start(tmp_path):
    ws = tmp_path / "ws"
    write_program(ws, "healthy_optim")
    role, value = _capture(ws)
    perts = [[p.model_copy(update={"role": role}) for p in ps] for ps in _deltas(ws, value)]

    fresh = []
    for k, ps in enumerate(perts):
        out = tmp_path / f"fresh_{k}"
        out.mkdir()
        o = run_harness(FdConfig(workspace=str(ws), script=str(ws / "train.py"), outdir=str(out),
                                 capture=FdOptions(iteration=1, perturb=ps)), FdResult, cwd=ws)
        assert o.result is not None and o.result.capture is not None and o.result.capture.reached
        fresh.append(o.result.capture)

    hub = _hub(ws, [role])
    evaluations = [_evaluation(ws, k, ps) for k, ps in enumerate(perts)]
    entries = hub.run(evaluations)
    outcome = hub.close()
    assert entries is not None and [e.returncode for e in entries] == [0, 0, 0]
    for ev, want in zip(evaluations, fresh):
        got, _ = read_forked_session(Path(ev.result), Path(ev.stderr), FdResult)
        assert got is not None and got.capture is not None and got.capture.reached
        assert got.capture.objective == want.objective  # bit for bit: the same state, the same computation
        assert sorted(got.capture.applied) == sorted(want.applied)
        for r in got.capture.applied:
            np.testing.assert_array_equal(np.load(got.capture.applied[r]), np.load(want.applied[r]))
    assert fresh[0].objective != fresh[2].objective  # the perturbation moved the objective: a test that can fail
    assert outcome is not None and outcome.result is not None and outcome.result.fd_serve is not None
    served = outcome.result.fd_serve
    assert (served.forked_at, served.served, served.requests, served.refused) == (role, 3, 1, None)


def test_a_hub_forks_at_the_stop_when_no_role_is_used_and_says_so_per_evaluation(tmp_path):
    ws = tmp_path / "ws"
    write_program(ws, "healthy_optim")
    hub = _hub(ws, ["launch:no_such_kernel:0:0"])
    path = ws / "d.npy"
    np.save(path, np.ones(8))
    ev = _evaluation(ws, 0, [Perturbation(role="launch:no_such_kernel:0:0", delta=str(path))])
    entries = hub.run([ev])
    outcome = hub.close()
    assert entries is not None and entries[0].returncode == 0
    got, _ = read_forked_session(Path(ev.result), Path(ev.stderr), FdResult)
    assert got is not None and got.capture is not None and got.capture.unapplied == ["launch:no_such_kernel:0:0"]
    assert outcome is not None and outcome.result is not None and outcome.result.fd_serve is not None
    assert outcome.result.fd_serve.forked_at == "the end of iteration 1"


THREADED = """
import threading
import time

threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
"""


def test_a_thread_alive_at_the_fork_point_makes_the_hub_refuse_and_gradcheck_runs_from_the_start(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "train.py").write_text(HEADER + THREADED + VARIANTS["healthy_optim"], encoding="utf-8")
    role, _ = _capture(ws)
    hub = _hub(ws, [role])
    assert hub.run([_evaluation(ws, 0, [])]) is None
    outcome = hub.close()
    assert outcome is not None and outcome.result is not None and outcome.result.fd_serve is not None
    assert "threads were alive" in (outcome.result.fd_serve.refused or "")
    r = check(GradcheckArgs(script="train.py", record=False), ws)
    assert (r.passed, r.signature) == (True, "correct"), r.reason


SLOW_AFTER_FIRST = """
import time

v = wp.array(init_v(), dtype=float, requires_grad=True)
opt = warp.optim.SGD([v], lr=0.05)
for it in range(ITERS):
    xs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for s in range(STEPS):
            wp.launch(step, N, inputs=[xs[s], v, xs[s + 1], 0.1])
        if it == 1:
            time.sleep(30)  # after the parameter's first use in iteration 1: inside every forked evaluation
        wp.launch(loss_k, N, inputs=[xs[STEPS], target], outputs=[loss])
    tape.backward(loss)
    opt.step([v.grad])
    tape.zero()
"""


def test_an_evaluation_past_its_own_time_limit_is_killed_and_the_hub_serves_on(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "train.py").write_text(HEADER + SLOW_AFTER_FIRST, encoding="utf-8")
    role = "launch:step:6:1"  # iteration 1's first launch of `step` reads v as argument 1
    hub = _hub(ws, [role])
    first = hub.run([_evaluation(ws, 0, [], timeout_s=1.0)])
    second = hub.run([_evaluation(ws, 1, [], timeout_s=1.0)])
    outcome = hub.close()
    assert first is not None and first[0].timed_out and first[0].wall_s < 25  # it sleeps 30 s: a hang-catcher
    assert second is not None and second[0].timed_out
    assert outcome is not None and outcome.result is not None and outcome.result.fd_serve is not None
    assert outcome.result.fd_serve.served == 2


@pytest.mark.parametrize("variant", ["pingpong", "healthy_optim"])
def test_gradcheck_gives_the_same_numbers_with_the_hub_as_from_the_start(tmp_path, monkeypatch, variant):
    ws = tmp_path / "ws"
    write_program(ws, variant)
    args = GradcheckArgs(script="train.py", record=False)
    with_hub = check(args, ws)
    monkeypatch.setenv(HUB_ENV, "0")
    without = check(args, ws)

    def numbers(r):
        return json.dumps([r.passed, r.signature, r.evaluations, r.eps, [(d.ad, d.fd, d.band) for d in r.directions],
                           r.iterations])

    assert numbers(with_hub) == numbers(without)
    assert with_hub.directions, with_hub.reason
    # Every perturbed run but the capture came from a hub on one side, none on the other.
    assert with_hub.evaluations_from_hub == with_hub.evaluations - 1 and without.evaluations_from_hub == 0


NOISE_AFTER_FIRST_USE = """
rng = np.random.default_rng()  # seeded from the OS: every run of the script draws other numbers
v = wp.array(init_v(), dtype=float, requires_grad=True)
opt = warp.optim.SGD([v], lr=0.05)
for it in range(ITERS):
    xs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(step, N, inputs=[xs[0], v, xs[1], 0.1])
        # Drawn after v's first use, so inside every evaluation a hub forks: the forked evaluations share the
        # hub's generator state (and agree with each other), but not the capture run's.
        xs[1].assign(xs[1].numpy() + rng.normal(size=N).astype(np.float32) * 0.1)
        for s in range(1, STEPS):
            wp.launch(step, N, inputs=[xs[s], v, xs[s + 1], 0.1])
        wp.launch(loss_k, N, inputs=[xs[STEPS], target], outputs=[loss])
    tape.backward(loss)
    opt.step([v.grad])
    tape.zero()
"""


def test_noise_drawn_after_the_fork_point_is_still_found_by_the_unperturbed_rerun(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "train.py").write_text(HEADER + NOISE_AFTER_FIRST_USE, encoding="utf-8")
    r = check(GradcheckArgs(script="train.py", record=False), ws)
    assert r.evaluations_from_hub > 0
    assert (r.passed, r.signature, r.nondeterministic) == (None, "inconclusive", True), r.reason


@pytest.mark.parametrize("variant", ["pingpong", "healthy_optim"])
def test_the_first_iterations_check_started_beside_the_later_ones_gives_what_it_gives_after_it(tmp_path, monkeypatch,
                                                                                               variant):
    """The first iteration's check at the later one's step starts as soon as the later sweep has chosen it
    (`gradcheck._EarlyFirst`): the combined result is the one the check made afterwards gives, number for number."""
    from warpgrad.tools import gradcheck

    ws = tmp_path / "ws"
    write_program(ws, variant)
    args = GradcheckArgs(script="train.py", record=False)
    started: list[tuple[float, float]] = []
    real_start = gradcheck._EarlyFirst.start

    def start(self, step, trunc_rel):
        started.append((step, trunc_rel))
        real_start(self, step, trunc_rel)

    monkeypatch.setattr(gradcheck._EarlyFirst, "start", start)
    early = check(args, ws)
    monkeypatch.setattr(gradcheck._EarlyFirst, "start", lambda self, step, trunc_rel: None)
    after = check(args, ws)

    def numbers(r):
        return json.dumps([r.passed, r.signature, r.evaluations, r.eps, r.iterations,
                           [(d.ad, d.fd, d.band, d.status) for d in r.directions],
                           [p.model_dump(mode="json") for p in r.per_iteration]], default=str)

    assert started and early.iterations == after.iterations and 0 in after.iterations, early.iterations
    assert numbers(early) == numbers(after)
