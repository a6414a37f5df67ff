"""Capture stays a structure that can be changed (issue 22): one part per term of DESIGN.md's FD driver, each
readable in one sitting, behind the names other modules import."""

from pathlib import Path

import warpgrad.tools.harness.capture as capture

PACKAGE = Path(capture.__file__).parent
MAX_LINES = 300


def test_each_part_of_capture_reads_in_one_sitting():
    sizes = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert {"iterations.py", "params.py", "objective.py", "perturb.py", "listener.py"} <= set(sizes), sizes
    assert {n: s for n, s in sizes.items() if s > MAX_LINES} == {}


def test_the_names_other_modules_import_are_still_there():
    # tape_listener, tape_iterations, tracker_listener and main.py's table of listeners per mode import these.
    from warpgrad.tools.harness.main import MODES, _load

    for name in ("CaptureListener", "RunListener", "name_of", "frame_value", "scalar_of"):
        assert callable(getattr(capture, name)), name
    assert _load(MODES["run"]) is capture.RunListener
    assert _load(MODES["capture"]) is _load(MODES["fd"]) is capture.CaptureListener
