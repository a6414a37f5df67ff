"""The FD engine on real Warp programs: each signature is produced by a program with that bug."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from programs import write_program

from warpgrad.tools.gradcheck import GradcheckArgs, check

pytestmark = pytest.mark.warp

_CHECKED: dict = {}


def checked(tmp_path_factory, variant: str):
    """One check per program per session: several tests read the same result."""
    if variant not in _CHECKED:
        ws = tmp_path_factory.mktemp(variant)
        write_program(ws, variant)
        _CHECKED[variant] = check(GradcheckArgs(script="train.py", record=False), ws)
    return _CHECKED[variant]


@pytest.mark.parametrize(
    ("variant", "passed", "signature"),
    [
        ("healthy_optim", True, "correct"),
        ("host_update_new_array", True, "correct"),
        ("missing_zero", False, "grows_across_iterations"),
        ("no_requires_grad", False, "zero"),
        ("pingpong", False, "subtly_wrong"),
        ("truncation", False, "truncation"),
        ("truncation_host_sum", False, "truncation"),
        ("nan_sqrt", False, "nan_inf"),
        ("stochastic", None, "inconclusive"),
        ("cancellation", None, "inconclusive"),
    ],
)
def test_each_program_gets_its_signature(tmp_path_factory, variant, passed, signature):
    r = checked(tmp_path_factory, variant)
    assert r.ok, r.reason
    assert (r.passed, r.signature) == (passed, signature), (r.explanation, r.reason, r.directions)


def test_a_healthy_check_states_what_it_compared_and_its_evidence(tmp_path_factory):
    r = checked(tmp_path_factory, "healthy_optim")
    assert r.iteration == 1  # the second iteration: accumulation bugs only show from there on
    assert "tape.backward(loss=loss)" in r.objective
    assert r.params[0].name == "v" and r.params[0].how == "SGD.step" and r.params[0].size == 8
    assert all(abs(c.ad - c.fd) <= 3 * c.band + 1e-4 * abs(c.fd) for c in r.directions)
    assert r.evaluations <= 18  # the sweep and three directions at the later iteration, three at the first
    assert r.files == {"train.py": r.files["train.py"]} and len(r.harness_id) == 64


def test_a_host_side_update_through_a_new_array_each_iteration_is_followed(tmp_path_factory):
    r = checked(tmp_path_factory, "host_update_new_array")
    assert r.params[0].name == "v" and "host read" in r.params[0].how


def test_a_scalar_loss_logged_as_its_mean_is_the_objective_and_the_scale_is_noted(tmp_path_factory):
    # The loss passed to backward is the objective the user built; printing it divided by N is cosmetic
    # (a hand seed on per-element terms is different: see test_capture_shapes, seeded_terms_mean).
    r = checked(tmp_path_factory, "mean_seeded_as_sum")
    assert (r.passed, r.signature, r.factor) == (True, "correct", None)
    assert r.printed_vs_seeded == "factor"
    assert any("prints 0.125× the loss it passes to backward" in n for n in r.notes), r.notes


def test_the_stochastic_forward_is_reported_as_such_not_as_a_gradient_bug(tmp_path_factory):
    r = checked(tmp_path_factory, "stochastic")
    assert "not deterministic" in r.reason


def test_float32_cancellation_is_reported_as_fd_cannot_resolve(tmp_path_factory):
    r = checked(tmp_path_factory, "cancellation")
    assert "FD cannot resolve" in r.reason


def test_without_an_update_the_parameters_are_ambiguous_until_named(tmp_path):
    write_program(tmp_path, "no_update")
    r = check(GradcheckArgs(script="train.py", record=False), tmp_path)
    assert not r.ok and "--param" in r.reason and "v" in r.reason and "w" in r.reason
    r = check(GradcheckArgs(script="train.py", params=["v"], record=False), tmp_path)
    assert r.ok and r.passed and [p.name for p in r.params] == ["v"]


def test_a_script_that_cannot_run_is_the_finding(tmp_path):
    (tmp_path / "train.py").write_text(
        "import warp as wp\nraise RuntimeError('no scene file')\n", encoding="utf-8"
    )
    r = check(GradcheckArgs(script="train.py", record=False), tmp_path)
    assert not r.ok and r.error.kind == "script_raised" and "no scene file" in r.reason


def test_a_script_without_backward_says_there_is_no_gradient(tmp_path):
    (tmp_path / "train.py").write_text("import warp as wp\nwp.init()\nprint('loss 1.0')\n", encoding="utf-8")
    r = check(GradcheckArgs(script="train.py", record=False), tmp_path)
    assert not r.ok and "never called tape.backward" in r.reason


def cli(ws: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "warpgrad", "gradcheck", *args],
        cwd=ws,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=600,
        check=False,
    )


def test_the_cli_exits_1_on_wrong_gradients_with_one_json_document(tmp_path):
    write_program(tmp_path, "missing_zero")
    p = cli(tmp_path, "train.py", "--json", "--no-record")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["signature"] == "grows_across_iterations" and doc["passed"] is False


def test_the_cli_exits_2_when_no_check_can_be_made(tmp_path):
    (tmp_path / "train.py").write_text("x = (\n", encoding="utf-8")
    p = cli(tmp_path, "train.py", "--no-record")
    assert p.returncode == 2
    assert "syntax" in p.stdout.lower() or "syntax" in p.stderr.lower()
