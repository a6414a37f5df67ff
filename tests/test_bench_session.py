"""The session benchmark plays diagnose -> fix -> gradcheck -> finish through a real `warpgrad mcp` over stdio."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.warp, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]


def test_the_minimal_session_on_a_suite_case_takes_four_calls_and_reads_under_twelve_thousand_characters(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_session", ROOT / "bench" / "bench_session.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_session"] = bench  # its pydantic models resolve their annotations through it
    spec.loader.exec_module(bench)
    out = tmp_path / "session.json"
    assert bench.main(["--cases", "mpm_sand_wind", "--out", str(out)]) == 0
    (case,) = json.loads(out.read_text(encoding="utf-8"))["cases"]
    assert [c["tool"] for c in case["calls"]] == ["diagnose", "apply_patch", "gradcheck", "finish"]
    assert case["verdict"] == "wrong" and case["fix"] == "recorded"
    assert case["text_chars"] < 12_000
    diagnose = case["calls"][0]
    assert diagnose["text_chars"] <= 4_200  # the screen, plus its resource link
    assert 0 < diagnose["structured_chars"] <= 4_000  # the structured content is held to the budget too
    assert case["gate"].startswith("fixed: ")  # the gate's answer is recorded, accepted or refused


def test_a_ready_edit_that_says_it_is_partial_is_followed_by_the_rest_of_the_fix_and_the_gate_accepts(tmp_path):
    """suspension_rig_identification holds two bugs, the first masking the second: diagnose's ready edit adds the
    missing requires_grad and says it leaves the in-place `*=`; the session applies the rest of the recorded fix
    before the check (the edit alone left the check failing, G002)."""
    spec = importlib.util.spec_from_file_location("bench_session", ROOT / "bench" / "bench_session.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_session"] = bench
    spec.loader.exec_module(bench)
    out = tmp_path / "session.json"
    assert bench.main(["--cases", "suspension_rig_identification", "--out", str(out)]) == 0
    (case,) = json.loads(out.read_text(encoding="utf-8"))["cases"]
    assert [c["tool"] for c in case["calls"]] == ["diagnose", "edit_file", "apply_patch", "gradcheck", "finish"]
    assert case["fix"] == "ready+recorded" and case["check_after"] == "pass"
    assert case["gate"] == "fixed: accepted"
    assert case["text_chars"] < 12_000
