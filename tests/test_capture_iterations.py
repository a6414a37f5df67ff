"""An iteration is one parameter update (issue 22, item 3): several backward passes feeding one update are
one iteration; the objective is the sum the script reports for that update, the consumed gradient is the
sum its host accumulator applies, and an accumulator that drops a pass is never `correct`.

The shape: the parameter lives in numpy, each scene of an update makes its own Warp copy of it, runs its
own tape and backward, and the scene gradients are summed on the host before one step.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from warpgrad.tools.gradcheck import GradcheckArgs, check

pytestmark = pytest.mark.warp

SHAPES = Path(__file__).parent / "fixtures" / "shapes"
SCENES = 4


def _check(tmp_path: Path, *args: str):
    shutil.copy(SHAPES / "scenes_host_accumulated.py", tmp_path / "train.py")
    return check(GradcheckArgs(script="train.py", args=list(args), record=False), tmp_path)


def _printed(tmp_path: Path, *args: str) -> dict[int, float]:
    """The loss the script itself prints for each update (a plain run, outside warpgrad)."""
    out = subprocess.run([sys.executable, "train.py", *args], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout
    return {int(ln.split()[1].rstrip(":")): float(ln.split()[-1]) for ln in out.splitlines() if ln.startswith("update")}


def test_scenes_accumulated_on_the_host_are_one_iteration_and_correct(tmp_path):
    r = _check(tmp_path)
    assert (r.passed, r.signature) == (True, "correct"), (r.reason, r.notes)
    assert r.backward_calls == SCENES  # every scene's backward belongs to the update
    assert r.objective_value == pytest.approx(_printed(tmp_path)[r.iteration], rel=1e-7)
    assert "sum of 4 host reads" in r.gradient
    assert not any("left the parameter unchanged" in n for n in r.notes)


@pytest.mark.parametrize("bug", ["--forget-scene", "--skip-read"])
def test_an_accumulator_that_drops_a_scene_is_not_correct(tmp_path, bug):
    r = _check(tmp_path, bug)
    assert r.passed is False, (r.signature, r.reason, r.notes)
    assert r.backward_calls == SCENES
    assert r.objective_value == pytest.approx(_printed(tmp_path, bug)[r.iteration], rel=1e-7)
    if bug == "--forget-scene":
        # Read but never added: the step follows three of the four reads, and that is what is checked.
        assert any("3 of the 4 backward passes" in n and "left out: [3]" in n for n in r.notes), r.notes
