"""An iteration is one parameter update, and FD perturbs what that update's kernels read (issue 22).

Programs under tests/fixtures/shapes/ written as user code: parameters set from host values every iteration
(written through their numpy view, assigned, logged first), host accumulators, hand seeds. Each test runs
the real gradcheck on one of them; the expected outcome is the program's construction (a correct float64
program, or a named bug in a custom adjoint).
"""

import shutil
from pathlib import Path

import pytest

from warpgrad.tools.gradcheck import GradcheckArgs, check

pytestmark = pytest.mark.warp

SHAPES = Path(__file__).parent / "fixtures" / "shapes"


def _check(tmp_path: Path, name: str, *args: str):
    shutil.copy(SHAPES / f"{name}.py", tmp_path / "train.py")
    return check(GradcheckArgs(script="train.py", args=list(args), record=False), tmp_path)


@pytest.mark.parametrize("args", [(), ("--assign",), ("--log-first",), ("--assign", "--log-first")])
def test_a_parameter_written_on_the_host_before_its_use_is_perturbed_after_the_write(tmp_path, args):
    """A host read of the parameter, then a write of this iteration's values (through its numpy view or with
    assign): perturbing at the read puts the perturbation where the write erases it (FD sees nothing)."""
    r = _check(tmp_path, "host_mirror_write", *args)
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.notes)
    assert [p.role for p in r.params] == ["launch:relax:6:1"]  # the first kernel read after the write


@pytest.mark.parametrize("args", [("--bug-half",), ("--assign", "--log-first", "--bug-half")])
def test_a_wrong_adjoint_behind_a_host_written_parameter_is_found(tmp_path, args):
    r = _check(tmp_path, "host_mirror_write", *args)
    assert r.passed is False and r.signature in ("sparse_subset", "subtly_wrong"), (r.signature, r.reason)
