"""Warp driven from PyTorch, the three shapes users write, checked with torch installed (CI installs the CPU build).

- a Warp kernel inside a `torch.autograd.Function`, torch's Adam applying the gradient;
- a Warp gradient buffer shared with torch (`wp.from_torch` of a tensor that requires grad) that
  `optimizer.zero_grad()` does not clear: the gradient accumulates across iterations;
- a loss computed in torch from Warp output, its gradient handed back to the tape by hand.

Capture follows torch (tools/harness/torch_follow.py): the scalar torch loss is the objective where the tape's
seeds come from it, and the torch optimizer's step is the update. More programs of each shape, correct and
buggy, are in tests/test_torch_follow.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if os.environ.get("CI"):
    import torch  # noqa: F401  (CI installs torch: a missing one is a failure, not a skip)
else:
    pytest.importorskip("torch")

PROGRAMS = Path(__file__).parent / "fixtures" / "torch"


def _gradcheck(tmp_path: Path, name: str) -> dict:
    shutil.copy(PROGRAMS / f"{name}.py", tmp_path / f"{name}.py")
    p = subprocess.run([sys.executable, "-m", "warpgrad", "gradcheck", f"{name}.py", "--json", "--no-record"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)
    assert p.stdout.strip(), p.stderr[-2000:]
    return json.loads(p.stdout)


@pytest.mark.warp
def test_a_warp_gradient_buffer_shared_with_torch_accumulates_and_is_found(tmp_path):
    r = _gradcheck(tmp_path, "shared_grad")
    assert r["ok"] and r["passed"] is False
    assert r["signature"] == "grows_across_iterations"


@pytest.mark.warp
@pytest.mark.parametrize("name", ["autograd_fn", "torch_loss"])
def test_an_objective_that_lives_in_torch_is_followed_to_a_verdict(tmp_path, name):
    # Before torch_follow these got no verdict ("seeds backward by hand"): the torch loss is now the objective.
    r = _gradcheck(tmp_path, name)
    assert r["passed"] is True and r["signature"] == "correct", r["reason"]
    assert r["printed_vs_seeded"] == "same"


@pytest.mark.warp
@pytest.mark.parametrize("name", ["autograd_fn", "shared_grad", "torch_loss"])
def test_the_torch_programs_train(tmp_path, name):
    p = subprocess.run([sys.executable, str(PROGRAMS / f"{name}.py")], cwd=tmp_path, capture_output=True, text=True,
                       timeout=600, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    losses = [float(line.split()[-1]) for line in p.stdout.splitlines() if line.startswith("iter ")]
    assert len(losses) == 6 and losses[-1] < losses[0]
