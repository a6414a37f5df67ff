"""The pytest plugin and `warpgrad.testing`: users gate CI on gradients (pytester runs real pytest sessions)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import warp as wp

from warpgrad.testing import GradientCheckFailed, check_function

pytest_plugins = ["pytester"]

TRAIN = '''
import numpy as np
import warp as wp

STEPS = 16
DT = 0.02


@wp.kernel
def step(x: wp.array(dtype=float), v: wp.array(dtype=float), k: wp.array(dtype=float),
         x_out: wp.array(dtype=float), v_out: wp.array(dtype=float)):
    i = wp.tid()
    v_out[i] = v[i] - DT * k[i] * x[i]
    x_out[i] = x[i] + DT * v_out[i]


@wp.kernel
def misfit(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - 0.5
    wp.atomic_add(loss, 0, d * d)


def rollout(k):
    n = k.shape[0]
    x = wp.array(np.ones(n, dtype=np.float32), requires_grad=True)
    v = wp.zeros(n, dtype=float, requires_grad=True)
    for _ in range(STEPS):
        x2 = wp.zeros(n, dtype=float, requires_grad=True)
        v2 = wp.zeros(n, dtype=float, requires_grad=True)
        wp.launch(step, dim=n, inputs=[x, v, k], outputs=[x2, v2])
        x, v = x2, v2
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(misfit, dim=n, inputs=[x], outputs=[loss])
    return loss


k = wp.array(np.linspace(1.0, 2.0, 6).astype(np.float32), requires_grad=True)
for it in range(4):
    tape = wp.Tape()
    with tape:
        loss = rollout(k)
    tape.backward(loss)
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
    k.assign(k.numpy() - 0.3 * k.grad.numpy())
    ZERO
'''

USER_TESTS = '''
from pathlib import Path

import pytest

from warpgrad.testing import assert_gradients_correct

HERE = Path(__file__).parent


@pytest.mark.gradcheck
def test_good_training_gradients():
    r = assert_gradients_correct(HERE / "good_train.py")
    assert r.signature == "correct"


@pytest.mark.gradcheck
def test_bad_training_gradients():
    assert_gradients_correct(HERE / "bad_train.py")


def test_not_a_gradient_test():
    assert True
'''


def _plugin_args() -> list[str]:
    """Where warpgrad is installed (CI) its entry point loads the plugin; a source checkout names it."""
    installed = any(ep.name == "warpgrad" for ep in metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", "warpgrad.pytest_plugin"]


@pytest.mark.warp
def test_a_user_suite_passes_the_correct_script_and_fails_the_broken_one_with_evidence(pytester):
    pytester.makepyfile(good_train=TRAIN.replace("ZERO", "tape.zero()"),
                        bad_train=TRAIN.replace("ZERO", "pass  # the gradient is never cleared"),
                        test_user=USER_TESTS)
    result = pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning",
                                           timeout=900)
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert "warpgrad " in out and "warp-lang 1.19" in out  # the plugin's report header
    # The failure message a user sees: the headline, the evidence table and the top hypothesis.
    assert "GradientCheckFailed: gradients of bad_train.py are WRONG: grows_across_iterations" in out
    assert "AD·v" in out and "FD·v" in out and "band" in out
    assert "top hypothesis:" in out


def test_the_gradcheck_marker_is_registered(pytester):
    pytester.makepyfile(test_m='''
import pytest

@pytest.mark.gradcheck
def test_marked():
    pass

def test_plain():
    pass
''')
    result = pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider", "--strict-markers",
                                           "-m", "gradcheck")
    result.assert_outcomes(passed=1, deselected=1)
    markers = pytester.runpytest_subprocess(*_plugin_args(), "--markers").stdout.str()
    assert "@pytest.mark.gradcheck: checks gradients with warpgrad" in markers


# -- check_function: one launch, in the test's own process ------------------------------------------------

@wp.kernel
def _spring_force(x: wp.array(dtype=wp.vec3), k: wp.array(dtype=float), f: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    f[i] = -k[i] * x[i] * wp.length(x[i])


@wp.func
def _softclip(x: float):
    return wp.tanh(x)


@wp.func_grad(_softclip)
def _adj_softclip(x: float, adj_ret: float):
    t = wp.tanh(x)
    wp.adjoint[x] += adj_ret * (1.0 - t)  # wrong: the derivative is 1 - t*t


@wp.kernel
def _clip_all(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = _softclip(x[i]) * 2.0


@wp.kernel
def _square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def _sum_squares(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(out, 0, x[i] * x[i])


def test_a_correct_kernel_passes_in_float32():
    rng = np.random.default_rng(1)
    x = wp.array(rng.standard_normal((64, 3)).astype(np.float32), dtype=wp.vec3, requires_grad=True)
    k = wp.array(rng.uniform(0.5, 2.0, 64).astype(np.float32), requires_grad=True)
    f = wp.zeros(64, dtype=wp.vec3, requires_grad=True)
    r = check_function(_spring_force, inputs=[x, k], outputs=[f]).assert_correct()
    assert r.signature == "correct" and r.inputs == ["inputs[0]", "inputs[1]"]
    assert all(d.agree for d in r.directions) and len(r.directions) == 3


def test_a_wrong_custom_adjoint_fails_with_the_evidence():
    x = wp.array(np.linspace(-2.0, 2.0, 40).astype(np.float32), requires_grad=True)
    y = wp.zeros(40, dtype=float, requires_grad=True)
    r = check_function(_clip_all, inputs=[x], outputs=[y])
    assert r.passed is False and r.signature != "correct"
    with pytest.raises(GradientCheckFailed, match="gradients are WRONG") as info:
        r.assert_correct()
    assert "DISAGREE" in str(info.value) and "AD·v" in str(info.value)


def test_the_cost_does_not_grow_with_the_size():
    """A million inputs cost the same few launches as ten (the objective w·y is summed in float64 on the host)."""
    evaluations = {}
    for n in (10, 1_000_000):
        x = wp.array(np.random.default_rng(2).standard_normal(n).astype(np.float32), requires_grad=True)
        y = wp.zeros(n, dtype=float, requires_grad=True)
        r = check_function(_square, inputs=[x], outputs=[y]).assert_correct()
        evaluations[n] = r.evaluations
    assert evaluations[10] == evaluations[1_000_000] < 20


def test_an_accumulating_output_starts_from_zero_at_every_call():
    x = wp.array(np.linspace(0.5, 1.5, 32).astype(np.float32), requires_grad=True)
    out = wp.full(1, 123.0, dtype=float, requires_grad=True)  # garbage left by the test: zeroed before each call
    r = check_function(_sum_squares, inputs=[x], outputs=[out], dim=32).assert_correct()
    assert r.signature == "correct"
    assert abs(out.numpy()[0] - float(np.sum(x.numpy().astype(np.float64) ** 2))) < 1e-3


def test_a_float32_sum_over_a_million_terms_is_no_verdict_rather_than_a_guess():
    """Rounding of a float32 reduction of 1e6 terms swamps its change along a random direction: FD cannot judge."""
    n = 1_000_000
    x = wp.array(np.random.default_rng(2).standard_normal(n).astype(np.float32), requires_grad=True)
    out = wp.zeros(1, dtype=float, requires_grad=True)
    r = check_function(_sum_squares, inputs=[x], outputs=[out], dim=n)
    assert r.passed is None and r.signature == "inconclusive"


def test_a_python_function_that_launches_kernels_is_checked_through_its_tape():
    def model(x, y):
        tmp = wp.zeros_like(x)
        wp.launch(_clip_all, dim=x.shape[0], inputs=[x], outputs=[tmp])
        wp.launch(_sum_squares, dim=x.shape[0], inputs=[tmp], outputs=[y])

    x = wp.array(np.linspace(-1.0, 1.0, 16).astype(np.float32), requires_grad=True)
    y = wp.zeros(1, dtype=float, requires_grad=True)
    # The temporary is made inside: the chain goes through the wrong adjoint of _softclip.
    assert check_function(model, inputs=[x], outputs=[y]).passed is False


def test_nothing_to_differentiate_is_a_clear_error():
    x = wp.array(np.ones(4, dtype=np.float32))  # requires_grad=False
    y = wp.zeros(4, dtype=float)
    with pytest.raises(ValueError, match="no input to differentiate"):
        check_function(_clip_all, inputs=[x], outputs=[y])


def test_a_script_outside_its_workspace_is_refused(tmp_path):
    from warpgrad.testing import check_script

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "t.py").write_text("print(1)\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not inside the workspace"):
        check_script(tmp_path / "a" / "t.py", workspace=tmp_path / "b")
    with pytest.raises(FileNotFoundError):
        check_script(tmp_path / "missing.py")


def installed_dist() -> metadata.Distribution:
    """The installed wheel's metadata (not the in-tree egg-info a source checkout's root also holds)."""
    found = [d for d in metadata.distributions(name="warpgrad")
             if any(str(f) == "warpgrad/__init__.py" for f in d.files or [])]
    assert found, "warpgrad is not installed (pip install .)"
    return found[0]


def test_the_wheel_declares_the_plugin():
    dist = installed_dist()
    eps = [ep for ep in dist.entry_points if ep.group == "pytest11"]
    assert [(ep.name, ep.value) for ep in eps] == [("warpgrad", "warpgrad.pytest_plugin")]
    assert Path(str(dist.locate_file("warpgrad/pytest_plugin.py"))).is_file()


def test_a_script_check_and_a_function_check_show_their_directions_in_the_same_rows():
    from warpgrad.testing import FunctionCheck, direction_rows, failure_message
    from warpgrad.tools import fd
    from warpgrad.tools.gradcheck import GradcheckResult

    dirs = [fd.DirectionCheck(direction=0, scope="all", step=1e-3, ad=1.0, fd=1.0, band=1e-3, agree=True),
            fd.DirectionCheck(direction=1, scope="k", step=1e-3, ad=2.0, fd=1.0, band=1e-3, status="disagree",
                              agree=False),
            fd.DirectionCheck(direction=2, scope="all", step=1e-3, ad=2.0, fd=1.0, band=3.0, status="unresolved",
                              agree=False)]
    rows = direction_rows(dirs)
    assert len(rows) == 4 and rows[1].endswith("agree") and rows[2].endswith("DISAGREE")
    assert rows[3].endswith("unresolved")  # it does not vote: neither agree nor DISAGREE
    script = failure_message(GradcheckResult(ok=True, passed=False, mode="capture", script="s.py", directions=dirs,
                                             signature="subtly_wrong"))
    function = FunctionCheck(passed=False, signature="subtly_wrong", explanation="x", inputs=["k"], directions=dirs,
                             evaluations=8).message()
    assert all(r in script.splitlines() and r in function.splitlines() for r in rows)
