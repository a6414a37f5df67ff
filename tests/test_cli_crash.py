"""A failure of warpgrad itself exits 3, never 1: `gradcheck`'s 1 means "your gradients are wrong", and a CI job
gating on it must not read our crash as a bug in the user's program."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.warp

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "bouncing_chain" / "train.py"


@pytest.mark.parametrize("command", ["run", "gradcheck"])
def test_an_internal_failure_exits_3_with_its_traceback(tmp_path: Path, command: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    # warpgrad's own kernel-cache root cannot be made (a file stands where its parent folder should be): the
    # failure is warpgrad's, before any user code runs.
    env = {**os.environ, "WARPGRAD_KERNEL_CACHE": str(blocker / "kernels")}
    env.pop("WARPGRAD_SHARED_KERNEL_CACHE", None)
    p = subprocess.run([sys.executable, "-m", "warpgrad", command, str(EXAMPLE)], cwd=tmp_path, env=env, check=False,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 3, p.stderr[-2000:]
    assert "Traceback" in p.stderr
    assert "internal error (exit 3)" in p.stderr
