"""The eval scoreboard cannot flatter: every percentage counts every case, the constant-answer baseline
sits beside each score, a fix counts only when warpgrad's check and the case's independent grader agree,
and the graders (the expected answers) are unreachable from an agent's workspace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from warpgrad.evals.run_cases import (
    CaseScore,
    EvalRun,
    _grade_fix,
    _ledger_grading,
    run_suite,
    scoreboard,
    summarize,
)
from warpgrad.evals.suite import load_suite
from warpgrad.tools.ledger import Ledger
from warpgrad.tools.registry import ToolError, load_tools

CHECKOUT = Path(__file__).resolve().parents[1]
SUITE_DIR = CHECKOUT / "evals"


def _wrong(i: int, **kw) -> CaseScore:
    return CaseScore(id=f"w{i}", should_trigger=True, expected_verdict="gradients_wrong",
                     expected_signature="zero", **kw)


def test_one_good_patch_among_ten_is_ten_percent_not_a_hundred():
    scores = [_wrong(0, ran=True, patched=True, fix_verified=True, verdict_right=True, root_cause_top3=True)]
    scores += [_wrong(i, ran=True, verdict_right=True) for i in range(1, 8)]  # diagnosed, never patched
    scores += [_wrong(8, error="the case crashed"), _wrong(9)]  # crashed, unattempted
    scores += [CaseScore(id="c0", should_trigger=True, expected_verdict="gradients_correct",
                         expected_signature="correct", ran=True, verdict_right=False)]
    s = summarize(scores)
    fix = s.score("fix verified")
    assert (fix.cases, fix.value_pct, fix.baseline_pct) == (10, 10.0, 0.0)
    verdict = s.score("verdict right")
    assert (verdict.cases, verdict.value_pct) == (11, round(100 * 8 / 11, 1))
    assert (verdict.baseline_pct, verdict.baseline) == (round(100 * 10 / 11, 1), "always 'gradients_wrong'")
    assert s.score("root cause in top 3").value_pct == 10.0
    assert s.score("gate satisfied").value_pct == 0.0  # nobody finished: 0%, never "—"
    assert s.crashed_or_timed_out == ["w8"]


def test_objective_changes_and_fix_disagreements_are_summarised_and_shown():
    scores = [
        _wrong(0, ran=True, patched=True, warpgrad_fix_check=True, grader_fix_check=True, objective_unchanged=False,
               fix_verified=False),
        _wrong(1, ran=True, patched=True, warpgrad_fix_check=True, grader_fix_check=False, objective_unchanged=True,
               fix_verified=False, fix_disagreement="warpgrad's check passed but the independent grader failed"),
        _wrong(2, ran=True, patched=True, warpgrad_fix_check=True, grader_fix_check=True, objective_unchanged=True,
               fix_verified=True),
    ]
    s = summarize(scores)
    assert s.objective_changed == ["w0"] and (s.objective_unchanged, s.patched) == (2, 3)
    assert s.fix_disagreements == ["w1: warpgrad's check passed but the independent grader failed"]
    board = scoreboard(EvalRun(suite="x", agent="replay:x", cases=scores, summary=s))
    assert "**changed** in w0 (not a verified fix)" in board
    assert "- w1: warpgrad's check passed but the independent grader failed" in board
    assert "| fix verified | 33.3% | 3 | 0.0% (patch nothing) |" in board
    assert "| w1 |" in board and "**no** (yes / **no**)" in board


def test_the_constant_answer_baseline_of_the_shipped_suite_is_what_always_wrong_scores():
    suite = load_suite(SUITE_DIR)
    unattempted = [CaseScore(id=str(c.id), should_trigger=c.should_trigger, expected_verdict=c.expected_verdict,
                             expected_signature=c.expected_signature) for c in suite.cases]
    s = summarize(unattempted)
    pos = [c for c in suite.cases if c.should_trigger]
    wrong = sum(c.expected_verdict == "gradients_wrong" for c in pos)
    line = s.score("verdict right")
    assert line.value_pct == 0.0 and line.cases == len(pos)
    assert line.baseline == "always 'gradients_wrong'" and line.baseline_pct == round(100 * wrong / len(pos), 1)


# -- the fix check runs the case's independent grader ----------------------------------------------------

CASE = "heat_rod_conductivity"
CONTRARIAN = """import json
print(json.dumps({"passed": False, "signature": "subtly_wrong", "max_rel_error": 0.5}))
"""


def _tmp_suite(root: Path, grader: str | None) -> Path:
    """A one-case graded suite (the shipped case) with its own independent grader."""
    shutil.copytree(SUITE_DIR / "files" / CASE, root / "files" / CASE)
    shutil.copytree(SUITE_DIR / "graders" / CASE, root / "graders" / CASE)
    if grader is not None:
        (root / "graders" / "fdcheck.py").write_text(grader, encoding="utf-8")
    return root


def _patched_workspace(suite_root: Path, out: Path) -> Path:
    ws = out / "workspaces" / CASE
    shutil.copytree(suite_root / "files" / CASE, ws)
    shutil.copytree(suite_root / "graders" / CASE / "fixed", ws, dirs_exist_ok=True)  # the reference fix
    return ws


@pytest.mark.warp
@pytest.mark.slow
def test_the_reference_fix_is_verified_only_when_the_independent_grader_agrees(tmp_path):
    real = (SUITE_DIR / "graders" / "fdcheck.py").read_text(encoding="utf-8")
    for grader, verified in ((real, True), (CONTRARIAN, False)):
        root = _tmp_suite(tmp_path / ("agree" if verified else "disagree"), grader)
        suite = load_suite(root)
        ws = _patched_workspace(root, root.parent / f"{root.name}-out")
        score = CaseScore(id=CASE, should_trigger=True, patched=True)
        _grade_fix(suite, suite.case(CASE), ws, score)
        assert score.warpgrad_fix_check is True and score.objective_unchanged is True
        assert score.grader_fix_check is verified and score.fix_verified is verified
        if verified:
            assert score.fix_disagreement is None
        else:
            assert score.fix_disagreement.startswith("warpgrad's check passed but the independent grader failed")


# -- graders are unreachable from an agent's workspace ---------------------------------------------------


def test_no_tool_reads_or_writes_a_grader_from_an_eval_workspace(tmp_path):
    # A copy of the graded suite laid out as `warpgrad eval` stages it (a copy, so a tool that wrongly
    # wrote through could not damage the real graders).
    root = _tmp_suite(tmp_path / "suite", (SUITE_DIR / "graders" / "fdcheck.py").read_text(encoding="utf-8"))
    graders = root / "graders"
    ws = tmp_path / "out" / "workspaces" / CASE
    shutil.copytree(root / "files" / CASE, ws)
    (ws / "peek").symlink_to(graders, target_is_directory=True)
    secrets = [graders / CASE / "meta.json", graders / CASE / "probe.py", graders / "fdcheck.py"]
    before = {p: p.read_bytes() for p in secrets}
    secret = json.loads(before[secrets[0]])["expected_output"]
    targets: list[str] = []
    for p in secrets:
        targets += [str(p), os.path.relpath(p, ws), f"peek/{p.relative_to(graders)}"]
    tried = 0
    for name, spec in sorted(load_tools().items()):
        fields = spec.args.model_fields
        for field in ("path", "script", "probe", "paths", "output"):
            if field not in fields:
                continue
            for target in targets:
                raw = {k: "x" for k, f in fields.items() if f.is_required()}
                if field == "output":  # shrink writes `output` only when asked to write a copy
                    raw.update(script="fit_conductivity.py", use_suggested=True)
                raw[field] = [target] if field == "paths" else target
                tried += 1
                try:
                    result = spec.call(raw, ws)
                except (ToolError, ValidationError):
                    continue
                assert secret[:60] not in result.model_dump_json(), (name, field, target)
                pytest.fail(f"{name}({field}={target!r}) was not refused")
    diff = f"--- a/{os.path.relpath(secrets[0], ws)}\n+++ b/{os.path.relpath(secrets[0], ws)}\n@@ -1 +1 @@\n-{{\n+x\n"
    with pytest.raises(ToolError):
        load_tools()["apply_patch"].call({"diff": diff}, ws)
    assert tried >= 8 * len(targets)
    assert {p: p.read_bytes() for p in secrets} == before
    # the one reader of package files (references, over MCP and `warpgrad skill reference`) takes names only
    from warpgrad.agent.prompt import read_reference

    for name in (f"../evals/graders/{CASE}/meta.json", str(secrets[0]), "../evals/graders/fdcheck.py"):
        with pytest.raises(KeyError, match="no reference named"):
            read_reference(name)


@pytest.mark.slow
def test_the_wheel_ships_no_graders_or_expected_answers(tmp_path):
    src = tmp_path / "src"  # build from a copy: setuptools leaves build/ behind in the tree it builds
    shutil.copytree(CHECKOUT, src, ignore=shutil.ignore_patterns(".git", ".venv", ".ci-venv*", "build", "dist",
                                                                  "__pycache__", "*.egg-info", ".warpgrad"))
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(tmp_path)],
                       capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    wheel = next(tmp_path.glob("warpgrad-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "warpgrad/evals/evals.json" in names  # the public prompts ship
    assert not [n for n in names if "/graders/" in n or n.endswith("meta.json") or "fdcheck" in n or "/blind/" in n]
    hidden = {"expected_verdict", "expected_signature", "root_cause"}
    evals = json.loads(zipfile.ZipFile(wheel).read("warpgrad/evals/evals.json"))
    assert not hidden & set().union(*(e.keys() for e in evals["evals"]))


@pytest.mark.warp
@pytest.mark.slow
def test_a_replayed_session_that_applies_the_fix_is_verified_and_a_crashed_case_counts_as_failed(tmp_path):
    """End to end through `run_suite`: a recorded session patches one case (the reference fix, as an
    edit_file call); the other case has no recording, so its child crashes. The fix is verified by
    warpgrad and the independent grader together, and the crashed case still counts."""
    recorded = tmp_path / "recorded"
    (recorded / CASE).mkdir(parents=True)
    call = {"type": "tool_call", "id": "t1", "name": "edit_file", "is_error": False, "output": "{}", "input": {
        "path": "fit_conductivity.py",
        "old_text": "wp.zeros(NUM_CELLS - 1, dtype=float) for _ in range(NUM_STEPS)]",
        "new_text": "wp.zeros(NUM_CELLS - 1, dtype=float, requires_grad=True) for _ in range(NUM_STEPS)]",
        "reason": "the flux buffers are on the taped path"}}
    (recorded / CASE / "trajectory.jsonl").write_text(json.dumps(call) + "\n", encoding="utf-8")
    run = run_suite(SUITE_DIR, f"replay:{recorded}", tmp_path / "out", cases=[CASE, "spray_nozzle_aim"], jobs=2,
                    timeout_s=600)
    by_id = {c.id: c for c in run.cases}
    fixed = by_id[CASE]
    assert fixed.patched and fixed.warpgrad_fix_check and fixed.grader_fix_check, fixed
    assert fixed.objective_unchanged is True and fixed.fix_verified is True and fixed.fix_disagreement is None
    assert by_id["spray_nozzle_aim"].error and run.summary.crashed_or_timed_out == ["spray_nozzle_aim"]
    line = run.summary.score("fix verified")
    assert (line.cases, line.value_pct, line.baseline_pct) == (2, 50.0, 0.0)
    board = (tmp_path / "out" / "scoreboard.md").read_text(encoding="utf-8")
    assert "| fix verified | 50.0% | 2 | 0.0% (patch nothing) |" in board
    assert "Objective unchanged by the patch: 1 of 1 patched cases." in board


def test_a_relative_suite_path_reaches_the_per_case_children(tmp_path, monkeypatch):
    monkeypatch.chdir(CHECKOUT)  # `warpgrad eval --suite evals/blind` from a checkout
    run = run_suite(Path("evals"), f"replay:{tmp_path / 'none'}", tmp_path / "out", cases=[CASE], timeout_s=120)
    log = Path(run.cases[0].log).read_text(encoding="utf-8")
    assert "no recorded trajectory" in log and "SuiteError" not in log


def test_a_model_session_is_graded_from_the_typed_records_of_its_ledger(tmp_path):
    """The first check that ran gives the verdict and signature (a failed one does not count); a malformed
    check record is no evidence; the last finish is the outcome the gate is asked about."""
    case = next(c for c in load_suite(SUITE_DIR).cases if c.id == CASE)
    ledger = Ledger(tmp_path)
    ledger.append("gradcheck", {"ok": False, "passed": None, "signature": "inconclusive"}, tool="gradcheck")
    ledger.append("gradcheck", {"ok": True, "passed": False, "signature": "not a signature"}, tool="gradcheck")
    ledger.append("gradcheck", {"ok": True, "passed": False, "signature": "zero"}, tool="gradcheck")
    ledger.append("gradcheck", {"ok": True, "passed": True, "signature": "correct"}, tool="gradcheck")
    ledger.append("finish", {"outcome": "no_such_outcome"}, tool="finish")
    score = CaseScore(id=case.id, should_trigger=True)
    _ledger_grading(case, tmp_path, score)
    assert (score.verdict, score.signature, score.triggered) == ("gradients_wrong", "zero", True)
    assert score.gate_satisfied is False and score.patched is False
