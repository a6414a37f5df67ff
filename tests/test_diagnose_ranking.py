"""Ranking of `diagnose`'s hypotheses (the rule table in `tools/diagnose.py`, `_Ranker`).

The programs in tests/fixtures/ranking/ are user-style training loops where a quick-check rule fires on the
root-cause line (marked `# root cause: WGnnn`) AND a kernel also fails its own per-launch gradcheck_tape.
The real `warpgrad diagnose --json` must lead with the rule hit at that file:line, backed by a measurement
of the run, never with the generic "kernel K fails gradcheck_tape"; a generic per-launch hypothesis that
several launch sites repeat is one hypothesis.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from warpgrad.tools.diagnose import Evidence, _launch_failures, _Ranker
from warpgrad.tools.signatures import Signature
from warpgrad.tools.tape import GradcheckRow, LaunchCheck

FIXTURES = Path(__file__).parent / "fixtures" / "ranking"
MARK = re.compile(r"#\s*root cause:\s*(WG\d{3})")
PROGRAMS = {  # fixture (a file, or a folder of modules) -> the script to run
    "compaction_counter.py": "compaction_counter.py",
    "helpers_split": "train.py",
    "damped_smoothstep.py": "damped_smoothstep.py",
}
BOOKKEEPING = {"compaction_counter.py"}  # fixtures whose root-cause kernel writes an integer counter


def root_cause(ws: Path) -> tuple[str, str, int]:
    """(rule, workspace-relative file, line) of the single `# root cause:` marker in the copied program."""
    hits = [(m.group(1), p.relative_to(ws).as_posix(), i)
            for p in sorted(ws.rglob("*.py"))
            for i, ln in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if (m := MARK.search(ln))]
    assert len(hits) == 1, hits
    return hits[0]


def diagnose_cli(ws: Path, script: str) -> dict:
    p = subprocess.run(
        [sys.executable, "-m", "warpgrad", "diagnose", script, "--json", "--no-record", "--bisect", "never",
         "--device", "cpu"],
        cwd=ws, capture_output=True, text=True, encoding="utf-8", timeout=600, check=False,
    )
    assert p.returncode == 1, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])  # 1: gradients wrong
    return json.loads(p.stdout)


@pytest.mark.warp
@pytest.mark.slow
@pytest.mark.parametrize("fixture", sorted(PROGRAMS))
def test_the_rule_hit_at_the_root_cause_line_ranks_first(tmp_path, fixture):
    src = FIXTURES / fixture
    if src.is_dir():
        shutil.copytree(src, tmp_path, dirs_exist_ok=True)
    else:
        shutil.copy(src, tmp_path / fixture)
    rule, file, line = root_cause(tmp_path)
    r = diagnose_cli(tmp_path, PROGRAMS[fixture])
    top = r["hypotheses"][0]
    assert (top["rule"], top["file"], top["line"]) == (rule, file, line), r["hypotheses"]
    if fixture in BOOKKEEPING:
        # The root-cause kernel hands out slots from a counter: an FD relaunch would advance it (not a pure
        # function of the inputs), so it is not relaunched, and the rule hit leads on its own.
        skipped = [s["reason"] for td in r["tape"]["tapes"] for s in td["gradcheck_skipped"]]
        assert any("integer arrays" in s for s in skipped), skipped
        assert not any(h["rule"] == "kernel_adjoint" for h in r["hypotheses"]), r["hypotheses"]
        return
    failed = [lc for td in r["tape"]["tapes"] for lc in td["gradcheck"] if lc["passed"] is False]
    assert failed, "the shape needs a kernel that fails its own gradcheck_tape"  # else the test proves nothing
    sources = {e["source"] for e in top["evidence"]}
    assert "rule" in sources and sources & {"localization", "tracker", "tape"}, top  # corroborated by the run
    generic = [h for h in r["hypotheses"] if h["rule"] == "kernel_adjoint"]
    kernels = [h["title"].split()[1] for h in generic]
    assert len(kernels) == len(set(kernels)), generic  # one generic hypothesis per kernel, however many launches
    assert all(h["rank"] > top["rank"] for h in generic)


@pytest.mark.warp
@pytest.mark.slow
def test_a_generic_failure_repeated_at_many_launch_sites_is_one_hypothesis(tmp_path):
    # `advance` (a wrong hand-written adjoint, no rule hit) is launched at two sites per step: both fail.
    shutil.copy(FIXTURES / "damped_smoothstep.py", tmp_path / "damped_smoothstep.py")
    r = diagnose_cli(tmp_path, "damped_smoothstep.py")
    # One check per launch class: it stands for the other sites of the same kernel on alike data and names them.
    failing = [lc for td in r["tape"]["tapes"] for lc in td["gradcheck"]
               if lc["passed"] is False and lc["kernel"].endswith("advance")]
    sites = {(lc["file"], lc["line"]) for lc in failing} | {
        (s.rsplit(":", 1)[0], int(s.rsplit(":", 1)[1])) for lc in failing for s in lc["also_at"]}
    assert len(sites) >= 2, sites
    generic = [h for h in r["hypotheses"] if h["rule"] == "kernel_adjoint"]
    assert len(generic) == 1 and "advance" in generic[0]["title"], r["hypotheses"]
    assert len(generic[0]["evidence"]) == 1, generic[0]  # one line with the count, not one per launch
    assert all(f"{f}:{ln}" in generic[0]["evidence"][0]["detail"] for f, ln in sites), generic[0]


def _check(kernel: str, line: int, rel: float, status: str = "failed") -> LaunchCheck:
    row = GradcheckRow(input="x", output="y", max_abs_error=rel, max_rel_error=rel, ad=1.0, fd=1.0 + rel,
                       passed="NaN" if status == "nan" else "FAIL")
    return LaunchCheck(index=line, kernel=kernel, file="train.py", line=line, status=status, passed=False, rows=[row])


def test_generic_per_launch_failures_order_by_measured_error_not_by_repetition(tmp_path):
    (tmp_path / "train.py").write_text("x = 1\n" * 40, encoding="utf-8")
    rk = _Ranker(tmp_path, Signature.SUBTLY_WRONG, True, ["train.py"])
    # `mild` fails at five launch sites with a small error; `severe` once with a large one; `nan` once.
    checks = [_check("mild", 10 + 2 * k, 0.02) for k in range(5)] + [_check("severe", 30, 0.9),
                                                                      _check("blowup", 35, 1.0, "nan")]
    _launch_failures(rk, [], checks)
    out = rk.ranked()
    assert [h.title.split()[1] for h in out] == ["blowup", "severe", "mild"], out
    assert len({h.score for h in out}) == 1  # repetition does not inflate a score


def test_a_corroborated_rule_hit_outranks_a_generic_failure_whatever_the_weights(tmp_path):
    (tmp_path / "train.py").write_text("x = 1\n" * 40, encoding="utf-8")
    rk = _Ranker(tmp_path, Signature.SPARSE_SUBSET, True, ["train.py"])
    _launch_failures(rk, [], [_check("other", 30, 0.9)])
    # A low-weight rule hit (the signature row does not list it) that a tape hazard sees at its line.
    rk.add("WG012 piecewise-constant", "WG012", "train.py", 5, 0.05, Evidence(source="rule", detail="pattern"))
    rk.add("hazard", "WG012", "train.py", 5, 0.05, Evidence(source="tape", detail="seen on the tape"))
    # An uncorroborated rule hit elsewhere stays in tier 1, below the corroborated one.
    rk.add("WG010 nonsmooth-at-zero", "WG010", "train.py", 20, 0.4, Evidence(source="rule", detail="pattern"))
    out = rk.ranked()
    assert [(h.rule, h.line) for h in out] == [("WG012", 5), ("WG010", 20), ("kernel_adjoint", 30)], out
