"""Ready fixes: a rule hit with a mechanical repair comes with the exact edit_file call, and applying that
call removes the hit (and, for the reused tape, makes the gradient match finite differences)."""

import pytest

from warpgrad.tools.diagnose import DiagnoseArgs, run_diagnose
from warpgrad.tools.quickchecks.base import Finding
from warpgrad.tools.ready_fix import ready_fix
from warpgrad.tools.registry import load_tools

pytestmark = pytest.mark.warp

REUSED_TAPE = """\
import numpy as np
import warp as wp


@wp.kernel
def energy(w: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 0.5 * w[i] * w[i] * float(i + 1))


@wp.kernel
def descend(w: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    w[i] = w[i] - lr * g[i]


weights = wp.array(np.linspace(1.0, 2.0, 6).astype(np.float32), dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
recorder = wp.Tape()
for epoch in range(6):
    loss.zero_()
    with recorder:
        wp.launch(energy, dim=6, inputs=[weights, loss])
    recorder.backward(loss)
    wp.launch(descend, dim=6, inputs=[weights, weights.grad, 0.05])
    print(f"epoch {epoch} loss {loss.numpy()[0]:.6f}")
"""

NO_GRAD_BUFFER = """\
import numpy as np
import warp as wp


@wp.kernel
def scale(a: wp.array(dtype=float), s: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = a[i] * s[0]


@wp.kernel
def norm(out: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, out[i] * out[i])


s = wp.array([2.0], dtype=float, requires_grad=True)
a = wp.array(np.ones(4, dtype=np.float32), dtype=float)
for step in range(3):
    scaled = wp.zeros(4,
                      dtype=float)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale, dim=4, inputs=[a, s], outputs=[scaled])
        wp.launch(norm, dim=4, inputs=[scaled], outputs=[loss])
    tape.backward(loss)
    s.assign(s.numpy() - 0.01 * s.grad.numpy())
    print(f"step {step} loss {loss.numpy()[0]:.4f}")
"""


def _hits(tools, ws, code):
    return [f for f in tools["quick_checks"].call({}, ws).findings if f.code == code]


def test_diagnose_offers_the_tape_reset_and_applying_it_fixes_the_gradient(tmp_path):
    (tmp_path / "fit.py").write_text(REUSED_TAPE, encoding="utf-8")
    tools = load_tools()
    res = run_diagnose(DiagnoseArgs(script="fit.py", bisect="never", record=False), tmp_path)
    offered = [h.ready_fix for h in res.hypotheses if h.ready_fix is not None]
    assert res.gradients_wrong is True and offered and offered[0].rule == "WG003"
    assert "recorder.reset()" in offered[0].arguments.new_text
    assert offered[0].leaves == []  # the one bug: the edit is the whole repair, and the screen does not say partial
    text = tools["diagnose"].answer(res, "summary")
    assert "ready fix (one call): edit_file {" in text and len(text) <= 4000
    assert "partial" not in text
    tools["edit_file"].call(offered[0].arguments.model_dump(), tmp_path)  # the one call, exactly as offered
    assert _hits(tools, tmp_path, "WG003") == []
    after = tools["gradcheck"].call({"script": "fit.py", "record": False}, tmp_path)
    assert after.passed is True


def test_a_missing_requires_grad_gets_the_keyword_even_on_a_call_over_two_lines(tmp_path):
    (tmp_path / "scale.py").write_text(NO_GRAD_BUFFER, encoding="utf-8")
    tools = load_tools()
    hit = next(f for f in _hits(tools, tmp_path, "WG001") if "scaled" in f.message)
    fix = ready_fix(hit, tmp_path)
    assert fix is not None and "dtype=float, requires_grad=True)" in fix.arguments.new_text
    tools["edit_file"].call(fix.arguments.model_dump(), tmp_path)
    assert not any("scaled" in f.message for f in _hits(tools, tmp_path, "WG001"))


def test_a_rule_without_a_mechanical_repair_or_a_source_of_another_shape_gets_none(tmp_path):
    (tmp_path / "fit.py").write_text(REUSED_TAPE.replace("    with recorder:", "    with wp.Tape() as recorder:"),
                                     encoding="utf-8")
    hit = Finding(code="WG003", name="missing-tape-zero", path="fit.py", line=22, col=4, message="", reference="",
                  signatures=[], severity="error", confidence="high")
    assert ready_fix(hit, tmp_path) is None  # a fresh tape per iteration is not the reused-tape shape
    other = hit.model_copy(update={"code": "WG004"})
    assert ready_fix(other, tmp_path) is None


HELPER_ALLOCATION = """\
import numpy as np
import warp as wp


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])


def scratch(n):
    return wp.zeros(n, dtype=float)


x = wp.array(np.ones(4, np.float32), dtype=float, requires_grad=True)
for it in range(3):
    y = scratch(4)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=4, inputs=[x], outputs=[y])
        wp.launch(total, dim=4, inputs=[y], outputs=[loss])
    tape.backward(loss)
    x.assign(x.numpy() - 0.1 * x.grad.numpy())
    tape.zero()
"""


def test_an_array_from_a_project_helper_gets_no_keyword_the_helper_does_not_take(tmp_path):
    """`y = scratch(4)` is flagged (the helper returns wp.zeros without requires_grad), but
    `scratch(4, requires_grad=True)` would raise a TypeError: no ready fix, the prose fix stands."""
    (tmp_path / "fit.py").write_text(HELPER_ALLOCATION, encoding="utf-8")
    (hit,) = [f for f in _hits(load_tools(), tmp_path, "WG001") if "scratch" in f.message]
    assert ready_fix(hit, tmp_path) is None
    # A helper that takes the flag, called with it False: the value is what changes, the call stays valid.
    flagged = HELPER_ALLOCATION.replace("def scratch(n):\n    return wp.zeros(n, dtype=float)\n",
                                        "def scratch(n, requires_grad=True):\n"
                                        "    return wp.zeros(n, dtype=float, requires_grad=requires_grad)\n")
    (tmp_path / "fit.py").write_text(flagged.replace("y = scratch(4)", "y = scratch(4, requires_grad=False)"),
                                     encoding="utf-8")
    (hit,) = [f for f in _hits(load_tools(), tmp_path, "WG001") if "scratch" in f.message]
    fix = ready_fix(hit, tmp_path)
    assert fix is not None and "y = scratch(4, requires_grad=True)" in fix.arguments.new_text
    direct = HELPER_ALLOCATION.replace("    y = scratch(4)\n", "    y = wp.zeros(4, dtype=float)\n")
    (tmp_path / "fit.py").write_text(direct, encoding="utf-8")
    (hit,) = [f for f in _hits(load_tools(), tmp_path, "WG001") if "`y`" in f.message]
    fix = ready_fix(hit, tmp_path)
    assert fix is not None and "wp.zeros(4, dtype=float, requires_grad=True)" in fix.arguments.new_text
