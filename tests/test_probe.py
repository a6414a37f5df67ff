"""Probe files: the explicit FD driver, and every way a probe can be wrong."""

import textwrap

import pytest

from warpgrad.tools.gradcheck import GradcheckArgs, check

pytestmark = pytest.mark.warp

SIM = """\
import numpy as np
import warp as wp

N = 6


@wp.kernel
def step(x: wp.array(dtype=float), v: wp.array(dtype=float), x_out: wp.array(dtype=float)):
    i = wp.tid()
    x_out[i] = x[i] + v[i] * 0.1 + 0.1 * wp.sin(x[i])


@wp.kernel
def sq(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


v = wp.array(np.linspace(-1, 1, N).astype(np.float32), dtype=float, requires_grad=True)


def forward(buffers):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for s in range(len(buffers) - 1):
            wp.launch(step, N, inputs=[buffers[s], v], outputs=[buffers[s + 1]])
        wp.launch(sq, N, inputs=[buffers[-1]], outputs=[loss])
    return tape, loss


def states(k, pingpong):
    if pingpong:
        a = wp.ones(N, dtype=float, requires_grad=True)
        b = wp.zeros(N, dtype=float, requires_grad=True)
        return [a if s % 2 == 0 else b for s in range(k + 1)]
    return [wp.ones(N, dtype=float, requires_grad=True)] + [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(k)]
"""


def probe(pingpong: bool, loss_expr: str = "float(l.numpy()[0])") -> str:
    return textwrap.dedent(f"""\
        import sim


        def params():
            return {{"v": sim.v}}


        def loss():
            _, l = sim.forward(sim.states(5, {pingpong}))
            return {loss_expr}


        def grad():
            tape, l = sim.forward(sim.states(5, {pingpong}))
            tape.backward(l)
            g = sim.v.grad.numpy().copy()
            tape.zero()
            return {{"v": g}}
        """)


def workspace(tmp_path, probe_text: str):
    (tmp_path / "sim.py").write_text(SIM, encoding="utf-8")
    (tmp_path / "probe.py").write_text(probe_text, encoding="utf-8")
    return tmp_path


def test_a_correct_program_passes_through_its_probe_and_the_evidence_names_the_program_file(tmp_path):
    ws = workspace(tmp_path, probe(False))
    r = check(GradcheckArgs(probe="probe.py", record=False), ws)
    assert r.ok and r.passed and r.signature == "correct", (r.reason, r.directions)
    assert set(r.files) == {"sim.py", "probe.py"}
    assert r.mode == "probe" and r.evaluations <= 17


def test_a_broken_program_fails_through_its_probe(tmp_path):
    ws = workspace(tmp_path, probe(True))
    r = check(GradcheckArgs(probe="probe.py", record=False), ws)
    assert r.ok and r.passed is False and r.signature in ("subtly_wrong", "exact_factor")


def test_a_probe_returning_a_non_scalar_gets_a_clear_error(tmp_path):
    ws = workspace(tmp_path, probe(False, loss_expr="l.numpy().tolist() * 2"))
    r = check(GradcheckArgs(probe="probe.py", record=False), ws)
    assert not r.ok and "one scalar" in r.reason


def test_a_probe_that_never_imports_the_program_is_not_evidence(tmp_path):
    text = (
        "import numpy as np\nimport warp as wp\nx = wp.zeros(3, dtype=float, requires_grad=True)\n"
        "def params():\n    return {'x': x}\ndef loss():\n    return float(np.sum(x.numpy() ** 2))\n"
        "def grad():\n    return {'x': 2 * x.numpy()}\n"
    )
    (tmp_path / "probe.py").write_text(text, encoding="utf-8")
    r = check(GradcheckArgs(probe="probe.py", record=False), tmp_path)
    assert not r.ok and "never imported a workspace file" in r.reason


def test_a_probe_missing_its_functions_is_refused_by_name(tmp_path):
    ws = workspace(tmp_path, "import sim\n\ndef params():\n    return {'v': sim.v}\n")
    r = check(GradcheckArgs(probe="probe.py", record=False), ws)
    assert not r.ok and "loss()" in r.reason


def test_a_nondeterministic_probe_is_reported_as_such(tmp_path):
    ws = workspace(tmp_path, probe(False, loss_expr="float(l.numpy()[0]) + __import__('random').random()"))
    r = check(GradcheckArgs(probe="probe.py", record=False), ws)
    assert r.signature == "inconclusive" and "not deterministic" in r.reason


def test_a_probe_is_partial_evidence_unless_declared_the_users_objective(tmp_path):
    ws = workspace(tmp_path, probe(pingpong=False))
    plain = check(GradcheckArgs(probe="probe.py", record=False), ws)
    declared = check(GradcheckArgs(probe="probe.py", record=False, declared_objective=True), ws)
    assert (plain.objective_kind, declared.objective_kind) == ("probe", "probe_declared")
    assert declared.harness["declared_objective"] is True and declared.harness_id != plain.harness_id
