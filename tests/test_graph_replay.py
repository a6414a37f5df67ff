"""Graph replay followed: a program that captures forward and backward once with wp.ScopedCapture (on the CPU,
Warp 1.19 records an APIC graph) and replays it with wp.capture_launch every iteration gets a verdict, right
for a right adjoint and wrong for a wrong one; a graph whose replay hides the order of events is declined
with that reason."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from warpgrad.tools.gradcheck import GradcheckArgs, check

pytestmark = pytest.mark.warp

# A short rollout whose drag term has a hand-written adjoint; --wrong halves it. The graph holds the forward
# and the backward; the update and tape.zero() run outside it, as in Newton's diffsim examples.
ROLLOUT_PY = r'''
import sys
import numpy as np
import warp as wp

WRONG = "--wrong" in sys.argv
UPDATE_IN_GRAPH = "--update-in-graph" in sys.argv
STEPS = 6


@wp.func
def drag(v: float):
    return v * wp.abs(v)


@wp.func_grad(drag)
def adj_drag(v: float, adj_ret: float):
    scale = 2.0
    if wp.static(WRONG):
        scale = 1.0  # wrong on purpose: d/dv v|v| is 2|v|
    wp.adjoint[v] += scale * wp.abs(v) * adj_ret


@wp.kernel
def advance(x: wp.array(dtype=float), v: wp.array(dtype=float), x_next: wp.array(dtype=float),
            v_next: wp.array(dtype=float)):
    i = wp.tid()
    vn = v[i] - 0.1 * drag(v[i]) - 0.05 * x[i]
    v_next[i] = vn
    x_next[i] = x[i] + 0.1 * vn


@wp.kernel
def miss(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(p: wp.array(dtype=float), g: wp.array(dtype=float), rate: float):
    i = wp.tid()
    p[i] = p[i] - rate * g[i]


n = 4
v0 = wp.array(np.array([0.3, -0.2, 0.5, 0.1]), dtype=float, requires_grad=True)
xs = [wp.zeros(n, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
vs = [v0] + [wp.zeros(n, dtype=float, requires_grad=True) for _ in range(STEPS)]
target = wp.array(np.array([1.0, -0.5, 0.8, 0.2]), dtype=float)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()


def forward_backward():
    loss.zero_()
    with tape:
        for t in range(STEPS):
            wp.launch(advance, n, inputs=[xs[t], vs[t]], outputs=[xs[t + 1], vs[t + 1]])
        wp.launch(miss, n, inputs=[xs[-1], target], outputs=[loss])
    tape.backward(loss)
    if UPDATE_IN_GRAPH:
        wp.launch(sgd, n, inputs=[v0, v0.grad, 0.5])


with wp.ScopedCapture(device="cpu") as capture:
    forward_backward()
graph = capture.graph

for it in range(4):
    wp.capture_launch(graph)
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
    if not UPDATE_IN_GRAPH:
        wp.launch(sgd, n, inputs=[v0, v0.grad, 0.5])
    tape.zero()
'''


def _check(ws: Path, *args: str):
    (ws / "train.py").write_text(ROLLOUT_PY, encoding="utf-8")
    return check(GradcheckArgs(script="train.py", args=list(args), record=False, device="cpu", timeout_s=300), ws)


def test_a_replayed_graph_with_a_right_adjoint_is_correct(tmp_path):
    r = _check(tmp_path)
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.explanation)
    assert [p.name for p in r.params] == ["v0"]


def test_a_replayed_graph_with_a_wrong_adjoint_is_wrong(tmp_path):
    r = _check(tmp_path, "--wrong")
    assert r.passed is False, (r.signature, r.reason, r.explanation)


def test_an_update_inside_the_graph_is_declined_with_the_reason(tmp_path):
    r = _check(tmp_path, "--update-in-graph")
    assert r.passed is None, (r.signature, r.explanation)
    assert "after its tape.backward" in r.reason, r.reason


@pytest.mark.slow
@pytest.mark.parametrize("example", ["ball", "spring_cage"])  # cloth: correct too, but 13 min on a shared CPU
def test_newtons_diffsim_examples_replaying_their_graph_on_the_cpu_are_correct(tmp_path, example):
    newton = pytest.importorskip("newton")
    src = Path(newton.__file__).parent / "examples" / "diffsim" / f"example_diffsim_{example}.py"
    shutil.copy(src, tmp_path / "train.py")
    r = check(GradcheckArgs(script="train.py", record=False, timeout_s=900,
                            args=["--viewer", "null", "--num-frames", "4", "--device", "cpu"]), tmp_path)
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.explanation)
