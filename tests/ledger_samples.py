"""Payloads of every ledger record kind, built from the tools' own result models, for the golden ledger.

`tests/fixtures/ledger_v1/` holds a ledger that the code of commit 1d9cf34 (before the typed record kinds
and before `_jsonable` became `pydantic_core.to_jsonable_python`) wrote from exactly these payloads, with
the key in `tests/fixtures/ledger_v1/key/`. `tests/test_ledger_golden.py` checks that today's code
serialises the same payloads to the same bytes and reads every record back as its typed kind.

Regenerate (only when the record format changes on purpose, with the code that defines the format):

    WARPGRAD_KEY_DIR=tests/fixtures/ledger_v1/key python tests/ledger_samples.py tests/fixtures/ledger_v1/ws

Only plain values and models that existed in that commit are used here (signatures as strings), so the
generator runs on both sides of the change.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from warpgrad.tools import fd
from warpgrad.tools.gradcheck import GradcheckResult, ParamCheck
from warpgrad.tools.horizon import BisectResult, HorizonCheck
from warpgrad.tools.run_script import RunError, RunScriptResult
from warpgrad.tools.tracker import InstrumentResult

SHA_A = "a" * 64
SHA_B = "b" * 64


def samples() -> list[tuple[str, Any, str | None, dict[str, str] | None]]:
    """(kind, payload, tool, files) of one record of each kind, with the values `_jsonable` treated specially:
    NaN and inf, numpy scalars and arrays, paths, tuples, sets, nested models."""
    check = GradcheckResult(
        ok=True, passed=False, signature="exact_factor", factor=2.0, explanation="AD/FD = 2 in every direction",
        objective="loss seeded into backward", objective_value=float(np.float32(0.4837)),
        params=[ParamCheck(name="v", shape=[4, 3], size=12, ad_norm=float(np.float64(1.25)), nonfinite=0)],
        directions=[fd.DirectionCheck(direction=0, scope="all", step=np.float64(1e-3), ad=2.0, fd=1.0, band=1e-6,
                                      ratio=2.0, agree=False)],
        max_rel_error=math.nan, max_abs_error=math.inf, iteration=1, iterations=[0, 1], harness_id=SHA_B,
        harness={"script": "sim.py", "args": ("--n", "3"), "eps": np.float32(0.001)}, files={"sim.py": SHA_A},
        notes=["a note"],
    )
    run = RunScriptResult(
        ok=False, script="sim.py", args=["--lr", "0.1"], returncode=1, wall_s=1.5, final_loss=None,
        loss_trajectory=[3.0, math.inf, math.nan], stdout_tail="loss 3.0\nloss inf\n",
        error=RunError(kind="script_raised", message="ValueError: boom", file="sim.py", line=7), files={"sim.py": SHA_A},
    )
    tracker = InstrumentResult(ok=True, clean=True, files={"sim.py": SHA_A})
    bisect = BisectResult(ok=True, script="sim.py", checks=[HorizonCheck(horizon=4, passed=True, signature="correct", max_rel_error=1e-5)])
    return [
        ("gradcheck", check, "gradcheck", None),
        ("run", run, "run_script", None),
        ("tracker", tracker, "instrument", None),
        ("patch", {"paths": ["sim.py"], "before": {"sim.py": SHA_A}, "after": {"sim.py": SHA_B}, "created": [],
                   "diagnostic": [], "diff": "--- a\n+++ b\n", "backup_op": "op1"}, "edit_file", {"sim.py": SHA_B}),
        ("undo", {"backup_op": "op1", "paths": ["sim.py"], "after": {"sim.py": SHA_A}}, "undo", {"sim.py": SHA_A}),
        ("shrink", {"script": "sim.py", "source_sha256": SHA_A, "output": "sim_shrunk.py", "sha256": SHA_B,
                    "changes": [{"id": "n", "line": 3, "old": "1000", "new": "10"}], "device_note": None},
         "shrink", {"sim_shrunk.py": SHA_B}),
        ("file", {"path": Path("probe.py"), "sha256": SHA_B, "purpose": "probe"}, "create_file", {"probe.py": SHA_B}),
        ("bisect", bisect, "bisect", None),
        ("diagnose", {"script": "sim.py", "gradients_wrong": True, "signature": "zero", "factor": None,
                      "summary": "zero gradient", "hypotheses": [{"file": "sim.py", "line": 3}],
                      "timings": {"gradcheck": np.float64(1.5), "n": np.int64(2)}, "sets": {"x"},
                      "shape": (np.int32(2), 3), "grid": np.arange(4, dtype=np.float32).reshape(2, 2)},
         "diagnose", None),
        ("symptom_gone", {"user_confirmed": True, "statement": "training converges now"}, "symptom_gone", None),
        ("finish", {"outcome": "diagnosis_only", "summary": "the gradient is zero", "evidence": {"check": 0},
                    "comparison": None, "signed": True}, "finish", None),
    ]


def write(workspace: Path) -> None:
    from warpgrad.tools.ledger import Ledger

    led = Ledger(workspace)
    for kind, payload, tool, files in samples():
        led.append(kind, payload, tool=tool, files=files)


if __name__ == "__main__":
    write(Path(sys.argv[1]))
