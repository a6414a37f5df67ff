"""CI's smoke run of `warpgrad eval`: three shipped cases and a negative, autopilot, graded by the hidden graders."""

import json
from pathlib import Path

import pytest

from warpgrad.evals.run_cases import run_suite

# The checkout's suite: the graders (expected answers) are not in the wheel.
SUITE_DIR = Path(__file__).resolve().parents[1] / "evals"

pytestmark = pytest.mark.warp

CASES = ["spray_nozzle_aim", "drone_swarm_formation", "stepper_cart_parking", "neg_warp_build_error"]


def test_the_autopilot_runs_three_cases_and_a_negative_and_writes_its_scoreboard(tmp_path):
    run = run_suite(SUITE_DIR, "autopilot", tmp_path, cases=CASES, jobs=2, timeout_s=600)
    by_id = {c.id: c for c in run.cases}
    assert set(by_id) == set(CASES)
    assert run.summary.crashed_or_timed_out == []
    for cid in CASES[:3]:
        c = by_id[cid]
        assert c.ran and c.verdict_right, (cid, c.verdict, c.expected_verdict, c.error)
        assert c.no_harm
    assert by_id["spray_nozzle_aim"].signature == "zero"
    assert by_id["neg_warp_build_error"].triggered is None  # the autopilot has no prompt to decline
    assert json.loads((tmp_path / "results.json").read_text())["agent"] == "autopilot"
    board = (tmp_path / "scoreboard.md").read_text()
    assert "| case |" in board and "constant-answer baseline" in board
    # the autopilot patches nothing: over the two wrong-gradient cases it verifies no fix (0%, not "—")
    assert run.summary.score("fix verified").value_pct == 0.0 and run.summary.score("fix verified").cases == 2


def test_an_unknown_case_id_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown case"):
        run_suite(SUITE_DIR, "autopilot", tmp_path, cases=["no_such_case"])
