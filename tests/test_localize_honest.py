"""Localization that cannot lie or litter: an array the NaN check cannot read is never called finite, NaN in a
struct field is found, and the horizon sweep's script copies go away even when its process is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from warpgrad.tools.scratch_copies import PREFIX, ScriptCopies, sweep_stale
from warpgrad.tools.tape import inspect

STRUCT_NAN_PY = """
import numpy as np
import warp as wp

@wp.struct
class Body:
    pos: wp.vec3
    mass: float

@wp.kernel
def spread(x: wp.array(dtype=float), bodies: wp.array(dtype=Body)):
    i = wp.tid()
    b = Body()
    b.pos = wp.vec3(x[i], 0.0, 0.0)
    b.mass = wp.log(x[i])          # log of a negative entry: NaN in a struct field
    bodies[i] = b

@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])

x = wp.array(np.array([1.0, -2.0, 3.0]), dtype=float, requires_grad=True)
for it in range(2):
    bodies = wp.zeros(3, dtype=Body)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(spread, 3, inputs=[x], outputs=[bodies])
        wp.launch(total, 3, inputs=[x], outputs=[loss])
    tape.backward(loss)
    x.assign(x.numpy() - 0.01 * x.grad.numpy())
    tape.zero()
"""


def test_finite_reads_struct_fields_and_never_answers_finite_when_it_cannot_read():
    from warpgrad.tools.harness.localize import _finite, finite_values

    # The host layout Warp gives a struct array: a numpy record, nested for a nested struct.
    dtype = np.dtype([("inner", [("a", "f4"), ("n", "i4")]), ("v", "f4", (3,))])
    arr = np.zeros(2, dtype=dtype)
    assert finite_values(arr) is True
    arr["inner"]["a"][1] = np.nan  # nested float field
    assert finite_values(arr) is False
    arr["inner"]["a"][1] = 0.0
    arr["v"][0, 2] = np.inf  # vector field
    assert finite_values(arr) is False
    assert finite_values(np.array([1, 2], dtype=np.int32)) is True
    assert finite_values(np.array([np.nan], dtype=np.float16)) is False
    # Values that cannot be read are "unknown", not "finite" (the old answer was True).
    assert _finite(object()) is None
    assert finite_values(np.zeros(2, dtype="V8")) is None


@pytest.mark.warp
def test_nan_written_into_a_struct_field_is_the_forward_origin(tmp_path):
    (tmp_path / "bodies.py").write_text(STRUCT_NAN_PY, encoding="utf-8")
    res = inspect(tmp_path, "bodies.py", timeout_s=180)
    assert res.ok, (res.reason, res.error)
    tape = res.tapes[0]
    assert tape.nan_origin is not None, tape
    assert tape.nan_origin.forward_kernel == "spread"
    assert tape.nan_origin.forward_arrays == ["bodies"]


SLOW_PY = """
import time
import numpy as np
import warp as wp

STEPS = 8

@wp.kernel
def step(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 1.5

x = wp.array(np.ones(4), dtype=float, requires_grad=True)
for it in range(3):
    time.sleep(600)  # the sweep is killed long before this returns
"""


def _bisect_in_child(ws: Path) -> subprocess.Popen:
    code = textwrap.dedent(f"""
        from warpgrad.tools.horizon import BisectArgs, bisect_horizon
        bisect_horizon(BisectArgs(script="slow.py", device="cpu", record=False, timeout_s=600), {str(ws)!r})
    """)
    return subprocess.Popen([sys.executable, "-c", code], env=os.environ.copy(), start_new_session=True)


def _wait_for(pred, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


def _copies(ws: Path) -> list[str]:
    return [p.name for p in ws.iterdir() if p.name.startswith(PREFIX)]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_horizon_copies_are_removed_when_the_sweep_is_killed(tmp_path, sig):
    (tmp_path / "slow.py").write_text(SLOW_PY, encoding="utf-8")
    proc = _bisect_in_child(tmp_path)
    try:
        assert _wait_for(lambda: _copies(tmp_path), 120), "the sweep never wrote its copy"
        os.killpg(proc.pid, sig)  # the sweep's whole process group: it and the harness child it started
        proc.wait(timeout=30)
        assert _wait_for(lambda: not _copies(tmp_path), 15), _copies(tmp_path)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # Only the user's script is left (and warpgrad's own state folder, which every sandboxed run makes).
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".warpgrad") == ["slow.py"]


def test_copies_of_a_dead_owner_are_swept_and_a_live_owners_are_kept(tmp_path):
    script = tmp_path / "sim.py"
    script.write_text("STEPS = 3\n", encoding="utf-8")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{PREFIX}{dead.pid}_4_sim.py"
    live = tmp_path / f"{PREFIX}{os.getppid()}_4_sim.py"
    stale.write_text("x", encoding="utf-8")
    live.write_text("x", encoding="utf-8")
    assert sweep_stale(tmp_path) == [stale.name]
    assert live.exists()
    live.unlink()
    with ScriptCopies(script) as copies:
        p = copies.write("2", "STEPS = 2\n")
        assert p.parent == tmp_path and p.read_text(encoding="utf-8") == "STEPS = 2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sim.py"]
