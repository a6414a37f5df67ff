"""The finish gate on real workspaces: one real Warp happy path, then each refusal with ledger records
shaped like GradcheckResult / tracker / run results (the measuring tools are built concurrently)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from warpgrad.tools.finish import FinishArgs, finish
from warpgrad.tools.gate import check_finish
from warpgrad.tools.ledger import Ledger
from warpgrad.tools.registry import ToolError, load_tools
from warpgrad.tools.workspace import EditFileArgs, WriteFileArgs, edit_file, undo, write_file

# A user program whose gradient is exactly zero: `y` is allocated without requires_grad (WG001).
SIM = """import json

import numpy as np
import warp as wp

N = 8
ITERS = 5


@wp.kernel
def scale(v: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * v[i]


@wp.kernel
def sq_err(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - 1.0
    wp.atomic_add(loss, 0, d * d)


def forward(v):
    y = wp.zeros(N, dtype=float)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale, dim=N, inputs=[v], outputs=[y])
        wp.launch(sq_err, dim=N, inputs=[y], outputs=[loss])
    return tape, loss


def loss_and_grad(v):
    tape, loss = forward(v)
    tape.backward(loss)
    g = v.grad.numpy().copy()
    tape.zero()
    return float(loss.numpy()[0]), g


def train():
    v = wp.array(np.zeros(N, dtype=np.float32), dtype=float, requires_grad=True)
    losses = []
    for _ in range(ITERS):
        value, g = loss_and_grad(v)
        losses.append(value)
        v.assign(v.numpy() - 0.05 * g)
    return losses


if __name__ == "__main__":
    losses = train()
    for it, value in enumerate(losses):
        print(f"iter {it} loss {value}")
    print(json.dumps({"losses": losses}))
"""

# The FD probe the agent would write: AD from the program's own tape vs central differences of its loss.
PROBE = """import json
import sys

import numpy as np
import warp as wp

if "--tracker" in sys.argv:
    wp.config.verify_autograd_array_access = True  # before the program's modules load

import sim

EPS = 1e-2
rng = np.random.default_rng(0)
v0 = rng.uniform(-1.0, 1.0, sim.N).astype(np.float32)
v = wp.array(v0, dtype=float, requires_grad=True)
value, ad = sim.loss_and_grad(v)
fd = np.zeros(sim.N)
for i in range(sim.N):
    for sign in (1.0, -1.0):
        w = v0.copy()
        w[i] += sign * EPS
        _, loss = sim.forward(wp.array(w, dtype=float, requires_grad=True))
        fd[i] += sign * float(loss.numpy()[0]) / (2 * EPS)
print(json.dumps({"loss": value, "ad": ad.tolist(), "fd": fd.tolist()}))
"""


_CLI = "import typer; from warpgrad.cli.workspace import register; app = typer.Typer(); register(app); app()"


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def files_of(ws: Path, *rels: str) -> dict[str, str]:
    return {r: sha(ws / r) for r in rels}


def check_payload(
    ws: Path,
    passed: bool,
    *,
    harness: str = "h-probe-eps1e-2-seed0",
    files: dict | None = None,
    signature: str | None = None,
    max_rel: float = 1.0,
    full_horizon: bool | None = None,
    objective_kind: str = "script",
    iterations: list[int] | None = None,
    objective_value: float = 8.0,
) -> dict:
    """A GradcheckResult-shaped payload (fields from the team brief)."""
    p = {
        "ok": True,
        "passed": passed,
        "signature": signature or ("correct" if passed else "zero"),
        "factor": None,
        "harness_id": hashlib.sha256(harness.encode()).hexdigest(),
        "files": files if files is not None else files_of(ws, "sim.py", "probe.py"),
        "objective": "sum of squared error over the full horizon",
        "params": [
            {"name": "v", "size": 8, "max_abs_err": max_rel * 4.0, "max_rel_err": max_rel, "ratio": None}
        ],
        "eps": 0.01,
        "noise_band": 1e-06,
        "max_rel_error": max_rel,
        "reason": "",
        "iteration": 0,
        "iterations": [0, 2] if iterations is None else iterations,
        "objective_kind": objective_kind,
        "objective_value": objective_value,
        "script": "sim.py",
        "probe": "probe.py",
        "device": "cpu",
        "warp_version": "1.19.0",
    }
    # Each checked iteration as gradcheck records it: a pass agrees in its 3 default directions.
    p["per_iteration"] = [{"iteration": i, "passed": passed, "objective_value": objective_value,
                           "agreeing_directions": 3 if passed else 0} for i in p["iterations"]]
    if full_horizon is not None:
        p["full_horizon"] = full_horizon
    return p


def run_payload(ws: Path, losses: list[float], **extra) -> dict:
    return {
        "script": "sim.py",
        "returncode": 0,
        "ok": True,
        "final_loss": losses[-1],
        "loss_trajectory": losses,
        "wall_s": 1.5,
        "files": files_of(ws, "sim.py"),
        **extra,
    }


def tracker_payload(ws: Path, warnings: list[str] | None = None) -> dict:
    w = warnings or []
    return {"ok": True, "clean": not w, "warnings": w, "files": files_of(ws, "sim.py", "probe.py")}


def the_fix(ws: Path):
    return edit_file(
        EditFileArgs(
            path="sim.py",
            old_text="y = wp.zeros(N, dtype=float)",
            new_text="y = wp.zeros(N, dtype=float, requires_grad=True)",
            reason="y is on the taped path",
        ),
        ws,
    )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "sim.py").write_text(SIM, encoding="utf-8")
    write_file(
        WriteFileArgs(path="probe.py", content=PROBE, purpose="FD probe of sim.loss_and_grad"), tmp_path
    )
    return tmp_path


def build_fixed_chain(ws: Path, *, skip: set[str] = frozenset(), **over) -> Ledger:
    """run before, failing check, patch, passing check, clean tracker, improving rerun (each may be altered)."""
    led = Ledger(ws)
    led.append("run", run_payload(ws, [8.0, 8.0, 8.0]))
    if "failing" not in skip:
        led.append("gradcheck", check_payload(ws, False, max_rel=1.0))
    if "patch" not in skip:
        the_fix(ws)
    if "passing" not in skip:
        led.append("gradcheck", over.get("passing") or check_payload(ws, True, max_rel=2.5e-05))
    if "tracker" not in skip:
        led.append("tracker", over.get("tracker") or tracker_payload(ws))
    if "rerun" not in skip:
        led.append("run", over.get("rerun") or run_payload(ws, [8.0, 2.88, 1.04]))
    return led


# -- the real happy path --------------------------------------------------------------------------------


def _py(ws: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *argv],
        cwd=ws,
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
        timeout=180,
        env=os.environ.copy(),
    )


def _real_check(ws: Path) -> dict:
    p = _py(ws, "probe.py")
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    ad, fd = np.array(out["ad"]), np.array(out["fd"])
    err = np.abs(ad - fd)
    rel = float(np.max(err / np.maximum(np.abs(fd), 1e-6)))
    passed = rel <= 1e-2
    sig = "correct" if passed else "zero" if not ad.any() else "subtly_wrong"
    payload = check_payload(ws, passed, signature=sig, max_rel=rel)
    payload["params"] = [
        {
            "name": "v",
            "size": len(ad),
            "max_abs_err": float(err.max()),
            "max_rel_err": rel,
            "ratio": float(ad @ fd / (fd @ fd)),
        }
    ]
    return payload


def _real_run(ws: Path) -> dict:
    p = _py(ws, "sim.py")
    ok = p.returncode == 0
    losses = json.loads(p.stdout.strip().splitlines()[-1])["losses"] if ok else []
    return {
        "script": "sim.py",
        "returncode": p.returncode,
        "ok": ok,
        "final_loss": losses[-1] if losses else None,
        "loss_trajectory": losses,
        "files": files_of(ws, "sim.py"),
        "stderr_tail": p.stderr[-2000:],
    }


@pytest.mark.warp
def test_fail_patch_pass_tracker_rerun_then_finish_fixed_is_accepted_on_a_real_warp_program(ws):
    led = Ledger(ws)
    before = led.append("run", _real_run(ws))
    assert before.payload["loss_trajectory"] == [8.0] * 5  # the training stalls: the gradient is zero
    failing = led.append("gradcheck", _real_check(ws))
    assert failing.payload["passed"] is False and failing.payload["signature"] == "zero"

    patch = the_fix(ws)
    gate = check_finish(ws, "fixed")
    assert not gate.accepted and any("passing FD check" in m for m in gate.missing)

    passing = led.append("gradcheck", _real_check(ws))
    assert (
        passing.payload["passed"] is True and passing.payload["harness_id"] == failing.payload["harness_id"]
    )

    p = _py(ws, "probe.py", "--tracker")
    assert p.returncode == 0, p.stderr[-3000:]
    warnings = [ln for ln in (p.stdout + p.stderr).splitlines() if "overwrit" in ln.lower()]
    tracker = led.append(
        "tracker",
        {
            "ok": True,
            "clean": not warnings,
            "warnings": warnings,
            "files": files_of(ws, "sim.py", "probe.py"),
        },
    )
    after = led.append("run", _real_run(ws))
    assert after.payload["final_loss"] < before.payload["final_loss"]

    res = finish(
        FinishArgs(
            outcome="fixed",
            summary="y was allocated without requires_grad, so the tape "
            "dropped its adjoint and v.grad stayed zero.",
        ),
        ws,
    )
    assert res.evidence == {
        "failing_check": failing.seq,
        "passing_check": passing.seq,
        "patch": patch.seq,
        "tracker": tracker.seq,
        "run_before": before.seq,
        "run_after": after.seq,
    }
    assert (ws / res.report_path).is_file()
    assert Ledger(ws).records()[-1].kind == "finish"


@pytest.mark.warp
@pytest.mark.slow
def test_the_real_tools_run_fail_patch_pass_tracker_rerun_and_finish_fixed(tmp_path):
    """The whole chain through the registered tools themselves (run_script, gradcheck, instrument)."""
    tools = load_tools()
    (tmp_path / "sim.py").write_text(SIM, encoding="utf-8")
    before = tools["run_script"].call({"script": "sim.py"}, tmp_path)
    assert before.ok and before.final_loss == 8.0
    failing = tools["gradcheck"].call({"script": "sim.py"}, tmp_path)
    assert failing.ok and failing.passed is False and failing.signature == "zero"
    the_fix(tmp_path)
    refused = check_finish(tmp_path, "fixed")
    assert not refused.accepted and any("passing FD check" in m for m in refused.missing)
    passing = tools["gradcheck"].call({"script": "sim.py"}, tmp_path)
    assert passing.passed is True and passing.harness_id == failing.harness_id
    assert tools["instrument"].call({"script": "sim.py"}, tmp_path).clean
    after = tools["run_script"].call({"script": "sim.py"}, tmp_path)
    assert after.final_loss < before.final_loss
    res = finish(
        FinishArgs(outcome="fixed", summary="y lacked requires_grad, so v.grad stayed zero."), tmp_path
    )
    assert set(res.evidence) == {
        "failing_check",
        "patch",
        "passing_check",
        "tracker",
        "run_before",
        "run_after",
    }


# -- fixed: each refusal ------------------------------------------------------------------------------


def test_the_full_chain_written_as_records_is_accepted(ws):
    build_fixed_chain(ws)
    gate = check_finish(ws, "fixed")
    assert gate.accepted, gate.missing
    assert set(gate.evidence) == {
        "failing_check",
        "patch",
        "passing_check",
        "tracker",
        "run_before",
        "run_after",
    }


def _refused(ws: Path, outcome: str, *needles: str) -> list[str]:
    gate = check_finish(ws, outcome)
    assert not gate.accepted
    text = "\n".join(gate.missing)
    for n in needles:
        assert n in text, text
    return gate.missing


def test_fixed_is_refused_without_a_failing_check_before_the_patch(ws):
    build_fixed_chain(ws, skip={"failing"})
    _refused(ws, "fixed", "a failing FD check")


def test_fixed_is_refused_without_a_patch_after_the_failing_check(ws):
    build_fixed_chain(ws, skip={"patch"})
    _refused(
        ws,
        "fixed",
        "a patch (edit_file or apply_patch) of the user's program recorded after the failing check",
    )


def test_fixed_is_refused_when_the_harness_changed_between_before_and_after(ws):
    led = build_fixed_chain(ws, skip={"passing", "tracker", "rerun"})
    led.append("gradcheck", check_payload(ws, True, harness="a-different-probe-with-eps-1e-4", max_rel=1e-5))
    led.append("tracker", tracker_payload(ws))
    led.append("run", run_payload(ws, [8.0, 1.0]))
    _refused(ws, "fixed", "same harness", "used a different harness")


def test_fixed_is_refused_when_a_file_is_edited_after_the_passing_check(ws):
    build_fixed_chain(ws)
    with open(ws / "sim.py", "a", encoding="utf-8") as f:
        f.write("# edited by someone after the check\n")
    _refused(ws, "fixed", "is stale: sim.py changed on disk", "rerun gradcheck")


def test_fixed_is_refused_when_the_passing_check_never_imported_the_patched_file(ws):
    build_fixed_chain(ws, passing=None, skip={"passing", "tracker", "rerun"})
    led = Ledger(ws)
    led.append("gradcheck", check_payload(ws, True, files=files_of(ws, "probe.py"), max_rel=1e-5))
    led.append("tracker", tracker_payload(ws))
    led.append("run", run_payload(ws, [8.0, 1.0]))
    _refused(ws, "fixed", "never imported a patched file (sim.py)")


def test_a_patch_of_a_diagnostic_file_only_does_not_count_as_the_fix(ws):
    led = Ledger(ws)
    led.append("run", run_payload(ws, [8.0]))
    led.append("gradcheck", check_payload(ws, False))
    edit_file(EditFileArgs(path="probe.py", old_text="EPS = 1e-2", new_text="EPS = 1e-3"), ws)
    _refused(ws, "fixed", "only changed warpgrad's own diagnostic files")


def test_a_check_on_a_shrunk_copy_counts_for_the_program_it_was_cut_from_while_that_is_unchanged(ws):
    from warpgrad.tools.shrink import ShrinkArgs, shrink

    led = Ledger(ws)
    shrink(ShrinkArgs(script="sim.py", values={"ITERS": 2}), ws)
    led.append("run", run_payload(ws, [8.0, 8.0]))
    led.append("gradcheck", check_payload(ws, False, files=files_of(ws, "sim_shrunk.py")))
    the_fix(ws)
    # the copy was cut from the unpatched sim.py: a check on it now says nothing about the patched program
    led.append("gradcheck", check_payload(ws, True, max_rel=1e-5, files=files_of(ws, "sim_shrunk.py")))
    led.append("tracker", {"ok": True, "clean": True, "warnings": [], "files": files_of(ws, "sim.py")})
    led.append("run", run_payload(ws, [8.0, 2.88]))
    _refused(ws, "fixed", "is stale: sim.py changed on disk")
    shrink(ShrinkArgs(script="sim.py", values={"ITERS": 2}), ws)  # cut again from the patched program
    led.append("gradcheck", check_payload(ws, True, max_rel=1e-5, files=files_of(ws, "sim_shrunk.py")))
    gate = check_finish(ws, "fixed")
    assert gate.accepted, gate.missing


def test_a_pass_on_the_same_bytes_as_the_failure_is_not_a_fix(ws):
    led = Ledger(ws)
    led.append("run", run_payload(ws, [8.0]))
    led.append("gradcheck", check_payload(ws, False))
    the_fix(ws)
    undo(ws)
    led.append("gradcheck", check_payload(ws, True, max_rel=1e-5))  # the original program, a flaky pass
    led.append("tracker", tracker_payload(ws))
    led.append("run", run_payload(ws, [8.0, 1.0]))
    _refused(ws, "fixed", "ran the same bytes of the patched files as the failing check")


def test_fixed_is_refused_when_the_objective_did_not_improve(ws):
    build_fixed_chain(ws, skip={"rerun"})
    Ledger(ws).append("run", run_payload(ws, [8.0, 8.5, 9.0]))
    _refused(ws, "fixed", "ends at 9.0, which does not improve on 8.0")


def test_fixed_is_refused_without_a_clean_tracker_run_after_the_patch(ws):
    build_fixed_chain(ws, skip={"tracker"})
    _refused(ws, "fixed", "a clean overwrite-tracker run after the patch")
    Ledger(ws).append(
        "tracker", tracker_payload(ws, ["array y overwritten after it was read by kernel scale"])
    )
    _refused(ws, "fixed", "reported warnings")


def test_fixed_lists_every_missing_piece_at_once(ws):
    build_fixed_chain(ws, skip={"passing", "tracker", "rerun"})
    missing = _refused(ws, "fixed", "passing FD check", "tracker", "rerun of the user's workflow")
    assert len(missing) == 3


def test_a_user_confirmed_symptom_gone_record_can_stand_in_for_the_rerun(ws):
    build_fixed_chain(ws, skip={"rerun"})
    _refused(ws, "fixed", "rerun")
    Ledger(ws).append("symptom_gone", {"user_confirmed": True, "statement": "training converges now"})
    assert check_finish(ws, "fixed").accepted


def test_only_a_person_at_a_terminal_can_record_that_the_symptom_is_gone(ws):
    build_fixed_chain(ws, skip={"rerun"})
    cmd = [sys.executable, "-c", _CLI, "symptom-gone", "training converges now", "-w", str(ws)]
    p = subprocess.run(
        cmd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
        timeout=60,
    )
    assert p.returncode == 1 and "at a terminal" in p.stderr
    assert not check_finish(ws, "fixed").accepted
    main, sub = os.openpty()  # a real pseudo-terminal on stdin, as a person's shell has
    try:
        p = subprocess.run(
            cmd, stdin=sub, capture_output=True, text=True, encoding="utf-8", check=False, timeout=60
        )
    finally:
        os.close(main)
        os.close(sub)
    assert p.returncode == 0, p.stderr
    assert check_finish(ws, "fixed").accepted


def test_a_rerun_that_still_ends_in_nan_is_refused(ws):
    build_fixed_chain(ws, skip={"rerun"})
    Ledger(ws).append("run", run_payload(ws, [8.0, math.nan]))
    _refused(ws, "fixed", "still ends at a non-finite objective")


def test_nan_before_then_finite_and_decreasing_after_counts_as_improved(tmp_path):
    (tmp_path / "sim.py").write_text(SIM, encoding="utf-8")
    write_file(WriteFileArgs(path="probe.py", content=PROBE), tmp_path)
    led = Ledger(tmp_path)
    led.append("run", run_payload(tmp_path, [5.0, math.inf, math.nan]))
    led.append("gradcheck", check_payload(tmp_path, False, signature="nan_inf", max_rel=math.nan))
    the_fix(tmp_path)
    led.append("gradcheck", check_payload(tmp_path, True, max_rel=1e-5))
    led.append("tracker", tracker_payload(tmp_path))
    led.append("run", run_payload(tmp_path, [5.0]))  # finite, but shows no improvement of its own
    _refused(tmp_path, "fixed", "does not show its objective improving")
    led.append("run", run_payload(tmp_path, [5.0, 3.0, 1.0]))
    assert check_finish(tmp_path, "fixed").accepted


def test_an_edited_ledger_refuses_every_outcome(ws):
    build_fixed_chain(ws)
    path = ws / ".warpgrad" / "ledger.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"passed":false', b'"passed":true', 1))
    for outcome in ("fixed", "diagnosis_only"):
        _refused(ws, outcome, "an intact ledger")


def test_the_finish_tool_refuses_with_the_missing_pieces_and_records_an_accepted_finish(ws):
    # a tracker run after the patch that reported an overwrite: evidence against the outcome, which finish
    # does not paper over by running the tracker again
    build_fixed_chain(ws, skip={"tracker"})
    Ledger(ws).append("tracker", tracker_payload(ws, ["overwrite of xs[1] in step"]))
    with pytest.raises(ToolError, match=r"(?s)finish\(fixed\) refused.*- \[G009 clean-tracker\] a clean overwrite-tracker run"):
        finish(FinishArgs(outcome="fixed", summary="y lacked requires_grad on the taped path"), ws)
    assert all(r.kind != "finish" for r in Ledger(ws).records())
    Ledger(ws).append("tracker", tracker_payload(ws))
    # the tracker came after the rerun: that is fine, both follow the patch
    res = finish(FinishArgs(outcome="fixed", summary="y lacked requires_grad on the taped path"), ws)
    rec = Ledger(ws).records()[res.seq]
    assert (
        rec.kind == "finish" and rec.payload["outcome"] == "fixed" and rec.payload["evidence"] == res.evidence
    )
    assert res.report_path == ".warpgrad/report.md"


# -- the other outcomes ---------------------------------------------------------------------------------


def test_gradients_correct_needs_a_passing_full_horizon_check_on_the_unmodified_program(ws):
    led = Ledger(ws)
    _refused(ws, "gradients_correct", "a passing full-horizon FD check")
    led.append("gradcheck", check_payload(ws, True, max_rel=1e-5, full_horizon=False))
    _refused(ws, "gradients_correct", "a passing full-horizon FD check")
    led.append("gradcheck", check_payload(ws, True, max_rel=1e-5))
    _refused(ws, "gradients_correct", "[G007 workflow-run]")
    led.append("run", run_payload(ws, [8.0, 8.0]))
    assert check_finish(ws, "gradients_correct").accepted
    the_fix(ws)
    _refused(ws, "gradients_correct", "the program is modified (sim.py")
    undo(ws, all_patches=True)
    assert check_finish(ws, "gradients_correct").accepted  # back to the original bytes: the check holds again


def test_gradients_correct_is_refused_when_the_same_harness_also_failed_on_the_same_files(ws):
    led = Ledger(ws)
    led.append("gradcheck", check_payload(ws, False))
    led.append("gradcheck", check_payload(ws, True, max_rel=1e-5))
    led.append("run", run_payload(ws, [8.0, 8.0]))
    _refused(ws, "gradients_correct", "[G002 no-current-failure] the check at record 1")


def test_not_a_gradient_bug_needs_a_variant_run_that_improves_on_the_baseline(ws):
    led = Ledger(ws)
    # the check of the workflow (its arguments), then the workflow's run
    led.append("gradcheck", {**check_payload(ws, True, max_rel=1e-5), "harness": {"args": ["--lr", "1.0"]}})
    led.append("run", run_payload(ws, [4.0, 6.0, 9.0], args=["--lr", "1.0"]))
    _refused(ws, "not_a_gradient_bug", "a workflow run with the suspected non-gradient cause changed")
    led.append(
        "run", run_payload(ws, [4.0, 7.0, 12.0], args=["--lr", "2.0"], changed="learning rate 1.0 -> 2.0")
    )
    _refused(ws, "not_a_gradient_bug", "does not improve")
    led.append(
        "run", run_payload(ws, [4.0, 2.0, 0.5], args=["--lr", "0.01"], changed="learning rate 1.0 -> 0.01")
    )
    gate = check_finish(ws, "not_a_gradient_bug")
    assert gate.accepted, gate.missing
    assert gate.evidence["baseline_run"] == 2 and gate.evidence["variant_run"] == 4  # record 0 is probe.py


def test_blocked_needs_a_recorded_failed_run_that_says_why(ws):
    led = Ledger(ws)
    led.append("run", run_payload(ws, [1.0]))
    _refused(ws, "blocked", "a recorded failed run")
    led.append(
        "run",
        {
            "script": "sim.py",
            "ok": False,
            "returncode": 1,
            "stderr_tail": "ModuleNotFoundError: No module named 'warp.sim'",
            "files": files_of(ws, "sim.py"),
        },
    )
    assert check_finish(ws, "blocked").evidence == {"failed_run": 2}  # record 0 is probe.py


def test_diagnosis_only_needs_a_full_horizon_check_whether_it_passed_or_not(ws):
    _refused(ws, "diagnosis_only", "a full-horizon FD check")
    Ledger(ws).append("gradcheck", check_payload(ws, False))
    assert check_finish(ws, "diagnosis_only").accepted
    _refused(ws, "made_up_outcome", "one of fixed")


# -- the gate as a process (Claude Code hooks) ----------------------------------------------------------


def test_the_gate_command_exits_2_with_the_missing_pieces_on_stderr_and_0_when_proven(ws):
    build_fixed_chain(ws, skip={"tracker"})
    p = subprocess.run(
        [sys.executable, "-c", _CLI, "gate", "--outcome", "fixed", "-w", str(ws)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
        timeout=60,
    )
    assert p.returncode == 2 and "clean overwrite-tracker run" in p.stderr
    Ledger(ws).append("tracker", tracker_payload(ws))
    p = subprocess.run(
        [sys.executable, "-c", _CLI, "gate", "--outcome", "fixed", "--json", "-w", str(ws)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["accepted"] is True


def test_the_gate_command_without_an_outcome_needs_a_finish_that_still_holds(ws):
    build_fixed_chain(ws)
    cmd = [sys.executable, "-c", _CLI, "gate", "-w", str(ws)]
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", check=False, timeout=60)
    assert p.returncode == 2 and "end the session with the finish tool" in p.stderr
    finish(FinishArgs(outcome="fixed", summary="y lacked requires_grad on the taped path"), ws)
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", check=False, timeout=60)
    assert p.returncode == 0, p.stderr
    with open(ws / "sim.py", "a", encoding="utf-8") as f:
        f.write("# changed after finish\n")
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", check=False, timeout=60)
    assert p.returncode == 2 and "stale" in p.stderr


def test_a_rerun_with_different_arguments_does_not_prove_the_fix(ws):
    build_fixed_chain(ws, skip={"rerun"})
    Ledger(ws).append("run", run_payload(ws, [8.0, 0.5], args=["--lr", "0.001"]))
    _refused(ws, "fixed", "is not a run of the workflow", "['--lr', '0.001']")


def test_the_workspace_commands_are_listed_in_the_cli():
    from warpgrad.cli.main import COMMAND_MODULES

    assert "warpgrad.cli.workspace" in COMMAND_MODULES
