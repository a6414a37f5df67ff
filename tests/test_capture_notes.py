"""Every note is a measured fact (issue 22, item 6). Two notes used to be guesses stated as facts:

* "the loss the script prints is not the loss seeded into backward" on a script that prints that very loss
  array, only every other iteration;
* "not a plain gradient step" on plain SGD whose float32 step is small against the parameter's magnitude
  (the rounding of the new value, not the optimizer, leaves the residual).
"""

import shutil
from pathlib import Path

import pytest

from warpgrad.tools.gradcheck import GradcheckArgs, check

pytestmark = pytest.mark.warp

SHAPES = Path(__file__).parent / "fixtures" / "shapes"
NOT_SEEDED = "the loss the script prints is not the loss seeded into backward"


def _check(tmp_path: Path, *args: str):
    shutil.copy(SHAPES / "far_offsets_sparse_print.py", tmp_path / "train.py")
    return check(GradcheckArgs(script="train.py", args=list(args), record=False), tmp_path)


def test_the_seeded_loss_printed_at_another_cadence_is_not_called_another_quantity(tmp_path):
    r = _check(tmp_path)
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.notes)
    assert not any(NOT_SEEDED in n for n in r.notes), r.notes
    assert any("reads the seeded loss array back" in n for n in r.notes), r.notes
    # Plain SGD in float32 at ~100 m: the step is a plain one within the rounding of the new value.
    assert not any("not a plain step" in n for n in r.notes), r.notes
    assert any("plain step along the consumed gradient" in n and "float32 rounding" in n for n in r.notes), r.notes


def test_a_printed_quantity_that_is_not_the_seeded_loss_is_still_said(tmp_path):
    r = _check(tmp_path, "--print-spread")
    assert any(NOT_SEEDED in n for n in r.notes), r.notes
