"""Hand-written checkpointed backwards (issue 22, item 2): a piece of a backward is never `correct`.

Each program under tests/fixtures/shapes/ckpt_*.py splits a rollout into segments, keeps the state at the
boundaries, re-tapes the segments in reverse and seeds each segment's backward by hand with the adjoints of the
next segment's inputs. The default run of each is right (its gradient was compared with central FD of the full
objective by hand; `test_the_scalar_state_program_is_labelled_right` keeps one of those labels honest); each flag
breaks it the way users do: a boundary adjoint dropped, or a reused buffer's adjoints never zeroed between
segments. Capture cannot tie the seeded dot product of one segment to the objective the update minimizes, so
every one of them must end in no verdict naming the hand-written multi-tape backward, never `correct`.
The hand-off takes three forms: read to the host and assigned back, copied from one .grad into another on the
device, and passed as `grads=` straight from another array's .grad; the device forms with one-element state
arrays look like scalar loss seeds by their values, and were judged (`truncation` on a correct program).
"""

import importlib.util
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from warpgrad.tools.gradcheck import GradcheckArgs, check

pytestmark = pytest.mark.warp

SHAPES = Path(__file__).parent / "fixtures" / "shapes"

CASES = [
    ("ckpt_spring_chain", ()),  # float32, wp.copy of .grad into .grad on the device
    ("ckpt_spring_chain", ("--drop-velocity-adjoint",)),
    ("ckpt_heat_rod", ()),  # float64, host read then .grad.assign, reused step buffers
    ("ckpt_heat_rod", ("--no-zero",)),
    ("ckpt_drag_particle", ()),  # float64 vec2d, tape.backward(grads={...}) from other arrays' .grad
    ("ckpt_drag_particle", ("--drop-velocity-adjoint",)),
    ("ckpt_scalar_device_handoff", ()),  # float32 one-element state, grads= on the device
    ("ckpt_scalar_device_handoff", ("--drop-velocity-adjoint",)),
]


def _check(tmp_path: Path, name: str, *args: str):
    shutil.copy(SHAPES / f"{name}.py", tmp_path / "train.py")
    return check(GradcheckArgs(script="train.py", args=list(args), record=False), tmp_path)


@pytest.mark.parametrize(("name", "args"), CASES, ids=[f"{n}{''.join(a)}" for n, a in CASES])
def test_a_hand_written_checkpointed_backward_is_declined_with_its_reason(tmp_path, name, args):
    r = _check(tmp_path, name, *args)
    assert r.passed is None and r.signature == "inconclusive", (r.signature, r.explanation, r.reason)
    assert "multi-tape backward" in r.reason and "probe" in r.reason, r.reason


def test_an_adjoint_handed_over_on_the_device_is_named_as_such(tmp_path):
    # One-element state: by its values each boundary seed is a scalar loss seed. It is the .grad of the next
    # segment's input, passed as grads=: that identity, not the values, makes it a boundary adjoint.
    r = _check(tmp_path, "ckpt_scalar_device_handoff")
    assert r.passed is None, (r.signature, r.explanation)
    assert "another array's .grad, handed over from another backward" in r.reason, r.reason


def _load(name: str, *argv: str):
    saved = sys.argv
    sys.argv = ["train.py", *argv]
    try:
        spec = importlib.util.spec_from_file_location(f"_label_{name}{''.join(argv)}", SHAPES / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.argv = saved
    return mod


def test_the_scalar_state_program_is_labelled_right(capsys):
    """The label these tests rest on: the default run's first gradient is FD of the full objective (a plain
    rollout, no segments), and dropping the velocity adjoint moves it far off."""
    import warp as wp

    mod = _load("ckpt_scalar_device_handoff")

    def objective(stiff: float) -> float:
        y, _ = mod.simulate(wp.array([0.05], dtype=float), wp.array([-1.0], dtype=float),
                            wp.array([stiff], dtype=float), mod.SEG * mod.NSEG)
        return (float(y.numpy()[0]) - 0.02) ** 2

    fd = (objective(904.0) - objective(896.0)) / 8.0
    printed = {}
    for flag in ("", "--drop-velocity-adjoint"):
        m = _load("ckpt_scalar_device_handoff", *([flag] if flag else []))
        m.main()
        first = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("iter 0:"))
        printed[flag] = float(first.split("grad")[1])
    assert printed[""] == pytest.approx(fd, rel=1e-3)
    assert not np.isclose(printed["--drop-velocity-adjoint"], fd, rtol=0.2)


def test_a_named_objective_that_no_frame_holds_is_said_so_not_called_a_non_finite_forward(tmp_path):
    shutil.copy(SHAPES / "rebuild_each_iter.py", tmp_path / "train.py")
    r = check(GradcheckArgs(script="train.py", objective="no_such_loss", record=False), tmp_path)
    assert r.passed is None, (r.signature, r.explanation)
    assert "'no_such_loss' was not found in the script's frames" in r.reason, r.reason
    assert "non-finite" not in r.reason, r.reason
