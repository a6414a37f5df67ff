"""A suite as others publish it (Agent Skills evals schema: extra fields, negatives, no graders) runs end to end."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from replay_http import ReplayTransport, real_client

from warpgrad.evals.judge import judge
from warpgrad.evals.run_cases import CaseScore, _apply_judgement, find_entry, run_suite, scoreboard, summarize
from warpgrad.evals.suite import SuiteError, load_suite

PUBLISHED = Path(__file__).parent / "fixtures" / "published_skill"


@pytest.fixture
def skill(tmp_path: Path) -> Path:
    """A copy of the published skill folder (the suite lives in its evals/ and lists files from the skill root)."""
    dest = tmp_path / "skill"
    shutil.copytree(PUBLISHED, dest)
    return dest


def test_a_published_suite_loads_with_its_extra_fields_kept(skill):
    suite = load_suite(skill / "evals")
    assert not suite.graded
    by_id = {str(c.id): c for c in suite.cases}
    assert set(by_id) == {"1", "negative-plotting"}
    assert by_id["1"].expected_skill == "warp-debug-gradients"
    assert by_id["1"].unknown == {"metadata": {"author": "outside", "difficulty": "easy"}}
    assert by_id["negative-plotting"].should_trigger is False
    assert suite.problems() == []  # the listed file resolves from the skill folder above the suite


def test_a_published_suite_with_a_missing_file_names_it(skill):
    data = json.loads((skill / "evals" / "evals.json").read_text(encoding="utf-8"))
    data["evals"][0]["files"].append("evals/files/spring_fit/missing.py")
    (skill / "evals" / "evals.json").write_text(json.dumps(data), encoding="utf-8")
    assert load_suite(skill / "evals").problems() == ["1: listed file evals/files/spring_fit/missing.py does not exist"]


def test_a_malformed_published_case_is_still_a_clear_error(skill):
    data = json.loads((skill / "evals" / "evals.json").read_text(encoding="utf-8"))
    del data["evals"][0]["prompt"]
    (skill / "evals" / "evals.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SuiteError, match="prompt"):
        load_suite(skill / "evals")


def test_the_entry_is_the_one_script_a_user_would_run(tmp_path):
    case = load_suite(PUBLISHED / "evals").case("1")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text("X = 1\n", encoding="utf-8")
    (tmp_path / "train.py").write_text("print(1)\n", encoding="utf-8")
    assert find_entry(case, tmp_path) == "train.py"
    (tmp_path / "train.py").unlink()
    (tmp_path / "fit.py").write_text("if __name__ == '__main__':\n    pass\n", encoding="utf-8")
    assert find_entry(case, tmp_path) == "fit.py"
    (tmp_path / "other.py").write_text("if __name__ == '__main__':\n    pass\n", encoding="utf-8")
    assert find_entry(case, tmp_path) is None  # two candidates: no guess


@pytest.mark.warp
def test_without_a_key_every_answer_is_listed_beside_its_assertions_ungraded(skill, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    seen: list[tuple[int, int, str]] = []
    run = run_suite(skill / "evals", "autopilot", tmp_path / "out", jobs=2, timeout_s=600,
                    progress=lambda done, total, score: seen.append((done, total, score.id)))
    assert [(d, t) for d, t, _ in seen] == [(1, 2), (2, 2)] and {i for _, _, i in seen} == {"1", "negative-plotting"}
    by_id = {c.id: c for c in run.cases}
    positive = by_id["1"]
    assert positive.error is None and positive.ran
    assert positive.graded_by == "ungraded" and "ANTHROPIC_API_KEY" in (positive.judge_note or "")
    assert [a.assertion for a in positive.assertions] == load_suite(skill / "evals").case("1").assertions
    assert all(a.passed is None for a in positive.assertions)
    assert positive.answer and "Signature:" in positive.answer  # the autopilot diagnosed the listed script
    assert not by_id["negative-plotting"].should_trigger
    assert run.summary.ungraded == ["1", "negative-plotting"]
    board = (tmp_path / "out" / "scoreboard.md").read_text(encoding="utf-8")
    assert "## Answers beside assertions" in board and "**Ungraded** (2 cases)" in board
    assert "- [ungraded] Checks the gradient w.r.t. k against finite differences" in board
    # The suite's own files were staged, not touched.
    assert (skill / "evals" / "files" / "spring_fit" / "train.py").read_bytes() == (
        PUBLISHED / "evals" / "files" / "spring_fit" / "train.py").read_bytes()


def test_the_llm_judge_grades_each_assertion_through_the_real_client():
    case = load_suite(PUBLISHED / "evals").case("1")
    transport = ReplayTransport("judge_reply.json")
    j = judge(case, "Loss 0.0195 falling. FD vs AD: 2 of 4 directions disagree. The gradient is WRONG.",
              real_client(transport))
    assert j.graded and j.passed is False
    assert [g.passed for g in j.grades] == [True, True, False]
    assert j.grades[2].why == "It calls the gradient wrong."
    sent = transport.bodies()[0]
    user = sent["messages"][0]["content"]
    assert "The gradient is WRONG." in user and "2. Concludes the gradients are correct" in user
    assert "Reply with JSON only" in sent["system"]
    score = CaseScore(id="1", should_trigger=True)
    _apply_judgement(score, j)
    s = summarize([score])
    assert s.score("assertions all passed (LLM judge)").value_pct == 0.0 and s.ungraded == []


def test_a_judge_reply_that_is_not_the_json_asked_for_grades_nothing():
    case = load_suite(PUBLISHED / "evals").case("1")
    j = judge(case, "an answer", real_client(ReplayTransport("judge_prose.json")))
    assert not j.graded and j.passed is None
    assert "not the JSON asked for" in j.note
    assert all(g.passed is None for g in j.grades)


def test_the_scoreboard_marks_judged_assertions(tmp_path):
    case = load_suite(PUBLISHED / "evals").case("1")
    j = judge(case, "an answer", real_client(ReplayTransport("judge_reply.json")))
    score = CaseScore(id="1", should_trigger=True, answer="an answer")
    _apply_judgement(score, j)
    from warpgrad.evals.run_cases import EvalRun

    board = scoreboard(EvalRun(suite=str(tmp_path), agent="autopilot", cases=[score], summary=summarize([score])))
    assert "- [**fail**] Concludes the gradients are correct — It calls the gradient wrong." in board
    assert "- [pass] Runs train.py and reports the loss" in board
