"""Ranking: a rule hit inside a kernel that fails its own gradcheck outranks the generic "this kernel fails"
hypothesis (the failure becomes evidence for it); a pattern inside installed code (site-packages) is never a
hypothesis unless the evidence localizes the failure there."""

from __future__ import annotations

import pytest

from warpgrad.tools.diagnose import DiagnoseArgs, run_diagnose

pytestmark = pytest.mark.warp

# A running product carried through a dynamic loop inside a wp.func: Warp's backward of a dynamic loop does
# not keep the intermediate products, so the kernel's adjoint is wrong (WG009 at the `for`).
PRODUCT_FUNC = '''
@wp.func
def running_product(x: wp.array(dtype=float), base: int, n: int):
    acc = float(1.0)
    for k in range(n):
        acc = acc * (0.5 + x[base + k])
    return acc
'''

TRAIN_PY = '''
import numpy as np
import warp as wp
{imports}
HORIZON = 5
{func}

@wp.kernel
def windows(x: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = {call}(x, i, n)


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])


x = wp.array(np.linspace(0.2, 1.1, 12), dtype=float, requires_grad=True)
for it in range(3):
    y = wp.zeros(8, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(windows, 8, inputs=[x, HORIZON], outputs=[y])
        wp.launch(total, 8, inputs=[y], outputs=[loss])
    {side}
    tape.backward(loss)
    print("loss", float(loss.numpy()[0]))
    x.assign(x.numpy() - 0.01 * x.grad.numpy())
    tape.zero()
'''

PLAIN_FUNC = '''
@wp.func
def plain(x: wp.array(dtype=float), base: int, n: int):
    return x[base] * float(n)
'''

LIB_PY = '''
import warp as wp
{func}

@wp.kernel
def window_metric(x: wp.array(dtype=float), n: int, m: wp.array(dtype=float)):
    i = wp.tid()
    m[i] = running_product(x, i, n)
'''


METRIC_LIB_PY = '''
import warp as wp


@wp.kernel
def window_mean(x: wp.array(dtype=float), n: int, m: wp.array(dtype=float)):
    i = wp.tid()
    s = float(0.0)
    for k in range(4):
        s += x[i + k]
    m[i] = s / 4.0


@wp.kernel
def decay(m: wp.array(dtype=float)):
    i = wp.tid()
    m[i] = m[i] * 0.5


def track(x, n):
    m = wp.zeros(8, dtype=float, requires_grad=True)
    wp.launch(window_mean, 8, inputs=[x, n], outputs=[m])
    wp.launch(decay, 8, inputs=[m])
    return m
'''


def _diagnose(ws):
    r = run_diagnose(DiagnoseArgs(script="train.py", bisect="never", record=False, device="cpu"), ws)
    assert r.ok and r.gradients_wrong is True, (r.signature, r.summary)
    return r


def test_a_rule_hit_inside_a_failing_kernel_outranks_the_generic_per_launch_hypothesis(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN_PY.format(imports="", func=PRODUCT_FUNC, call="running_product",
                                                       side=""), encoding="utf-8")
    r = _diagnose(tmp_path)
    loop_line = next(i for i, s in enumerate((tmp_path / "train.py").read_text().splitlines(), 1) if "for k in" in s)
    top = r.hypotheses[0]
    assert (top.rule, top.file, top.line) == ("WG009", "train.py", loop_line), r.hypotheses
    assert {e.source for e in top.evidence} == {"rule", "localization"}  # the failing launch joined it
    assert not any(h.rule == "kernel_adjoint" for h in r.hypotheses), r.hypotheses


def test_patterns_in_installed_code_off_the_failing_path_are_not_hypotheses(tmp_path):
    # An installed package records two launches on the same tape that never reach the loss (a metric, then
    # an in-place decay of it): tape hazards at its own lines, none of them the failure.
    lib = tmp_path / "site-packages"
    lib.mkdir()
    (lib / "metriclib.py").write_text(METRIC_LIB_PY, encoding="utf-8")
    imports = "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent / 'site-packages'))\n" \
              "import metriclib\n"
    side = "with tape:\n        metriclib.track(x, HORIZON)"
    (tmp_path / "train.py").write_text(TRAIN_PY.format(imports=imports, func=PRODUCT_FUNC, call="running_product",
                                                       side=side), encoding="utf-8")
    r = _diagnose(tmp_path)
    assert r.hypotheses and r.hypotheses[0].file == "train.py", r.hypotheses
    assert not any(h.file and "site-packages" in h.file for h in r.hypotheses), r.hypotheses
    hazards = [h for h in r.tape.hazards if h.file and "metriclib.py" in h.file]
    assert hazards, r.tape.hazards  # the library's launches were seen, and set aside


def test_installed_code_is_a_hypothesis_where_the_failing_launch_is_localized_there(tmp_path):
    lib = tmp_path / "site-packages"
    lib.mkdir()
    (lib / "windowlib.py").write_text(LIB_PY.format(func=PRODUCT_FUNC) + '''

def windows(x, n, y):
    wp.launch(window_metric, y.shape[0], inputs=[x, n], outputs=[y])
''', encoding="utf-8")
    src = TRAIN_PY.format(imports="import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent / "
                          "'site-packages'))\nimport windowlib\n", func=PLAIN_FUNC, call="plain", side="")
    src = src.replace("wp.launch(windows, 8, inputs=[x, HORIZON], outputs=[y])", "windowlib.windows(x, HORIZON, y)")
    (tmp_path / "train.py").write_text(src, encoding="utf-8")
    r = _diagnose(tmp_path)
    assert any(h.file and "windowlib.py" in h.file and any(e.source == "localization" for e in h.evidence)
               for h in r.hypotheses[:3]), r.hypotheses
