"""`diagnose` end to end on real programs: verdict, signature, and the cause's line among the top hypotheses."""

import json
import subprocess
import sys

import pytest
from programs import HEADER, VARIANTS, write_program

from warpgrad.tools.diagnose import DiagnoseArgs, DiagnoseResult, run_diagnose
from warpgrad.tools.harness.trend_stop import settled
from warpgrad.tools.tape import inspect

pytestmark = pytest.mark.warp


def line_of(path, needle: str) -> int:
    return next(i for i, ln in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if needle in ln)


def without_addresses(x):
    """A dumped result without memory addresses (they differ between two processes)."""
    if isinstance(x, dict):
        return {k: without_addresses(v) for k, v in x.items() if k != "ptr"}
    if isinstance(x, list):
        return [without_addresses(v) for v in x]
    return x


def top_lines(r, n=3):
    return [(h.file, h.line) for h in r.hypotheses[:n]]


def test_a_pingpong_overwrite_is_found_at_its_launch(tmp_path):
    path = write_program(tmp_path, "pingpong")
    r = run_diagnose(DiagnoseArgs(script="train.py", bisect="never"), tmp_path)
    assert r.ok and r.gradients_wrong is True and r.signature == "subtly_wrong"
    assert ("train.py", line_of(path, "wp.launch(step, N, inputs=[a, v, b, 0.1])")) in top_lines(r)
    assert {e.source for e in r.hypotheses[0].evidence} >= {"tape"}
    assert any("stochastic" in x for x in r.ruled_out)
    # The tape run beside the FD check describes the first iteration the check led with too: no second tape run.
    assert set(r.timings) == {"run", "gradcheck", "tracker", "rules", "tape"}
    assert r.tape.iteration == r.gradcheck.iteration == 0
    alone = inspect(tmp_path, path, iteration=0, gradcheck_launches=True)
    assert without_addresses(r.tape.model_dump(exclude={"wall_s"})) == without_addresses(alone.model_dump(exclude={"wall_s"}))


def test_a_missing_tape_zero_is_named_with_its_signature(tmp_path):
    write_program(tmp_path, "missing_zero")
    r = run_diagnose(DiagnoseArgs(script="train.py", bisect="never", record=False), tmp_path)
    assert r.gradients_wrong is True and r.signature == "grows_across_iterations"
    assert "WG003" in [h.rule for h in r.hypotheses[:3]]


def test_correct_gradients_with_a_diverging_loss_point_at_the_learning_rate(tmp_path):
    src = (
        HEADER
        + """
v = wp.array(init_v(), dtype=float, requires_grad=True)
opt = warp.optim.SGD([v], lr=40.0)
for it in range(ITERS):
    xs = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for s in range(STEPS):
            wp.launch(step, N, inputs=[xs[s], v, xs[s + 1], 0.1])
        wp.launch(loss_k, N, inputs=[xs[STEPS], target], outputs=[loss])
    tape.backward(loss)
    opt.step([v.grad])
    tape.zero()
    print(f"iter {it} loss {loss.numpy()[0]:.6f}")
"""
    )
    (tmp_path / "train.py").write_text(src, encoding="utf-8")
    r = run_diagnose(DiagnoseArgs(script="train.py", iteration=0, bisect="never", record=False), tmp_path)
    assert r.gradients_wrong is False and r.signature == "correct"
    assert r.trajectory["trend"] == "diverging"
    assert "learning rate" in r.summary


def test_a_script_that_cannot_run_is_reported_as_the_blocker_and_the_cli_exits_2(tmp_path):
    (tmp_path / "train.py").write_text(
        "import warp as wp\nimport scene_loader_not_installed\n", encoding="utf-8"
    )
    r = run_diagnose(DiagnoseArgs(script="train.py", record=False), tmp_path)
    assert not r.ok and "missing_import" in r.blocked and r.gradcheck is None
    p = subprocess.run(
        [sys.executable, "-m", "warpgrad", "diagnose", "train.py", "--json", "--no-record"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
        check=False,
    )
    assert p.returncode == 2
    assert json.loads(p.stdout)["blocked"].startswith("missing_import")

    # The command's further outputs (declared with the tool): a Markdown report, and the whole record.
    p = subprocess.run(
        [sys.executable, "-m", "warpgrad", "diagnose", "train.py", "--json", "--detail", "full", "--no-record",
         "--md", "report.md"],
        cwd=tmp_path, capture_output=True, text=True, encoding="utf-8", timeout=300, check=False,
    )
    assert p.returncode == 2, p.stderr
    assert DiagnoseResult.model_validate_json(p.stdout).blocked.startswith("missing_import")
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "## Blocker" in report and "scene_loader_not_installed" in report


def test_diagnose_writes_its_evidence_to_the_ledger(tmp_path):
    write_program(tmp_path, "healthy_optim")
    r = run_diagnose(DiagnoseArgs(script="train.py", bisect="never"), tmp_path)
    assert r.gradients_wrong is False
    kinds = [
        json.loads(ln)["kind"] for ln in (tmp_path / ".warpgrad" / "ledger.jsonl").read_text().splitlines()
    ]
    # Verified gradients and no overwrite finding: the tracker (started alongside the check) has nothing to
    # confirm, so its records and time are not part of the diagnosis.
    # The plain run fixes the workflow (issue 23): the gate then judges every check against it.
    assert kinds == ["run", "workflow", "gradcheck", "diagnose"]
    assert r.tracker is None and "tracker" not in r.timings and r.run_cut_short_at is None


def test_a_script_that_fails_after_the_checked_iteration_is_still_reported_blocked(tmp_path):
    # The FD check, tracker and tape run alongside the plain run and stop at iteration 1, so they succeed
    # here; only the plain run reaches the crash, and its verdict is the one reported.
    path = write_program(tmp_path, "healthy_optim")
    path.write_text(path.read_text(encoding="utf-8") + "raise RuntimeError('checkpoint folder missing')\n",
                    encoding="utf-8")
    r = run_diagnose(DiagnoseArgs(script="train.py", record=False), tmp_path)
    assert not r.ok and r.blocked.startswith("script_raised") and "checkpoint folder missing" in r.blocked
    assert r.gradcheck is None and r.tracker is None and r.hypotheses == []
    assert len(r.run.loss_points) == 4  # the plain run trained to the end before it failed


LONG_TRAINING = HEADER.replace("ITERS = 4", "ITERS = 60") + VARIANTS["healthy_optim"]


def test_the_plain_run_stops_once_its_trend_is_read_unless_the_whole_run_is_asked_for(tmp_path):
    (tmp_path / "train.py").write_text(LONG_TRAINING, encoding="utf-8")
    cut = run_diagnose(DiagnoseArgs(script="train.py", iteration=0, bisect="never"), tmp_path)
    full = run_diagnose(DiagnoseArgs(script="train.py", iteration=0, bisect="never", record=False, full_run=True),
                        tmp_path)
    assert cut.ok and full.ok and cut.gradients_wrong is False and full.gradients_wrong is False
    assert cut.run_cut_short_at is not None and cut.run_cut_short_at < 59
    assert cut.run.loss_points[-1].iteration == cut.run_cut_short_at
    assert full.run_cut_short_at is None and full.run.loss_points[-1].iteration == 59
    assert cut.trajectory["trend"] == full.trajectory["trend"] == "improving"
    lines = [json.loads(ln) for ln in (tmp_path / ".warpgrad" / "ledger.jsonl").read_text().splitlines()]
    # The cut-short run is recorded with where it stopped: the gate compares a rerun with it only there, and it
    # fixes the workflow (issue 23).
    assert [ln["kind"] for ln in lines] == ["run", "workflow", "gradcheck", "diagnose"]
    assert lines[0]["payload"]["cut_short_at"] == cut.run_cut_short_at


def test_the_trend_counts_as_read_when_its_label_holds():
    assert not settled(["improving"] * 9)  # too few points for the oscillation reading
    assert settled(["flat"] * 5 + ["improving"] * 5)
    assert not settled(["improving"] * 9 + ["flat"])
    assert settled(["flat", "improving"] * 50)  # one that never settles is read at the cap


def test_the_tracker_runs_only_when_it_has_something_to_confirm(tmp_path):
    from warpgrad.tools.diagnose import _Stages
    from warpgrad.tools.quickchecks.base import Finding

    def finding(code):
        return Finding(code=code, name="x", path="train.py", line=3, col=0, message="m", reference="r",
                       signatures=["subtly_wrong"], severity="warning", confidence="medium")

    st = _Stages(DiagnoseArgs(script="train.py"), tmp_path, None)
    for wrong in (True, None):
        st.res.gradients_wrong = wrong
        assert st.needs_tracker()  # wrong, or no verdict: the tracker may locate the cause
    st.res.gradients_wrong = False
    st.res.findings = [finding("WG001"), finding("WG007")]  # neither is an overwrite the tracker can see
    assert not st.needs_tracker() and not st.overwrite_finding()
    st.res.findings.append(finding("WG005"))  # a ping-pong rebinding: the tracker confirms or refutes it
    assert st.needs_tracker() and st.overwrite_finding()


def test_disagreement_only_at_the_entries_of_a_non_smooth_objective_is_no_verdict_not_a_clean_bill(tmp_path):
    """gradcheck gives no verdict when AD and FD differ only at a few entries of a non-smooth objective (taken to
    sit at contact kinks, not shown to); diagnose says the same, never "not wrong": a bug confined to a few
    entries looks alike. The program is the suite's puck drop (correct by its grader), copied."""
    import shutil
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "evals" / "files" / "puck_drop_release_heights"
    shutil.copytree(src, tmp_path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    r = run_diagnose(DiagnoseArgs(script="drop_test.py", bisect="never", record=False), tmp_path)
    assert r.ok and r.gradcheck is not None and r.gradcheck.passed is None
    assert r.signature == "sparse_subset"
    assert r.gradients_wrong is None
    assert r.summary.startswith("no verdict on the gradients")
