"""The report: rendered from the ledger alone; every number in it comes from a ledger record."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from forge import forge_append
from test_gate import PROBE, SIM, build_fixed_chain, check_payload

from warpgrad.tools.finish import FinishArgs, finish
from warpgrad.tools.ledger import Ledger
from warpgrad.tools.report import build_report, render_markdown
from warpgrad.tools.workspace import WriteFileArgs, undo, write_file

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


def _ledger_numbers(ws: Path) -> set[str]:
    """Every number in the ledger: numeric values as the ledger writes them, and numbers inside its strings."""
    out: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, bool) or v is None:
            return
        if isinstance(v, (int, float)):
            out.add(json.dumps(v))
        elif isinstance(v, str):
            out.update(_NUMBER.findall(v))
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for r in Ledger(ws).records():
        walk(r.model_dump())
    return out


def _numbers_not_in_ledger(markdown: str, ws: Path) -> set[str]:
    return set(_NUMBER.findall(markdown)) - _ledger_numbers(ws)


@pytest.fixture
def finished(tmp_path: Path) -> Path:
    (tmp_path / "sim.py").write_text(SIM, encoding="utf-8")
    write_file(
        WriteFileArgs(path="probe.py", content=PROBE, purpose="FD probe of sim.loss_and_grad"), tmp_path
    )
    led = build_fixed_chain(tmp_path)
    led.append(
        "quick_checks",
        {
            "findings": [
                {
                    "code": "WG001",
                    "path": "sim.py",
                    "line": 24,
                    "message": "allocation on a taped path without requires_grad=",
                    "reference": "quick-checks.md §2",
                }
            ]
        },
    )
    led.append(
        "inspect_tape", {"findings": [], "summary": "launches scale then sq_err; y has no requires_grad"}
    )
    led.append("bisect", {"findings": [], "first_divergence": "none: the horizon-1 check already differs"})
    finish(
        FinishArgs(
            outcome="fixed",
            summary="y was allocated without requires_grad, so its adjoint was "
            "dropped and v.grad stayed zero.",
        ),
        tmp_path,
    )
    return tmp_path


def test_the_report_shows_the_evidence_chain_from_the_ledger(finished):
    md = render_markdown(build_report(finished))
    assert "**Outcome: fixed**" in md
    assert "## Root cause (the agent's words, not a measurement)" in md
    assert "> y was allocated without requires_grad" in md
    assert "### Before the fix: record 2, FAILED" in md and "### After the fix: record 4, passed" in md
    assert "max_rel_error 1.0 -> 2.5e-05" in md and "signature zero -> correct" in md
    assert "WG001 sim.py:24 allocation on a taped path" in md
    assert (
        "```diff\n--- a/sim.py\n+++ b/sim.py" in md
        and "+    y = wp.zeros(N, dtype=float, requires_grad=True)" in md
    )
    assert "- quick-checks.md §2" in md
    assert "overwrite tracker (record 5): no warnings" in md and "bisect (record 9): no findings" in md
    assert "final_loss 8.0" in md and "final_loss 1.04" in md
    assert "- `probe.py`: FD probe of sim.loss_and_grad (record 0)" in md


def test_every_number_in_the_report_is_found_in_the_ledger(finished):
    md = render_markdown(build_report(finished))
    assert _NUMBER.findall(md)  # the report does show numbers
    assert _numbers_not_in_ledger(md, finished) == set()
    # and the check itself catches a number the ledger never held
    assert _numbers_not_in_ledger(md + "\nmax_rel_error was 0.031415\n", finished) == {"0.031415"}


def test_numbers_survive_exactly_even_odd_floats_nan_and_long_trajectories(tmp_path):
    (tmp_path / "sim.py").write_text(SIM, encoding="utf-8")
    write_file(WriteFileArgs(path="probe.py", content=PROBE), tmp_path)
    led = Ledger(tmp_path)
    led.append(
        "run",
        {
            "script": "sim.py",
            "ok": True,
            "final_loss": math.nan,
            "loss_trajectory": [0.1 + 0.2, 1e-30, *[float(i) / 7 for i in range(20)], math.inf],
        },
    )
    led.append(
        "gradcheck", check_payload(tmp_path, False, max_rel=0.123456789012345, signature="exact_factor")
    )
    md = render_markdown(build_report(tmp_path))
    assert "0.30000000000000004" in md and "NaN" in md and "Infinity" in md
    assert "0.123456789012345" in md
    assert _numbers_not_in_ledger(md, tmp_path) == set()


def test_an_interim_report_has_no_outcome_and_no_root_cause(tmp_path):
    (tmp_path / "sim.py").write_text(SIM, encoding="utf-8")
    Ledger(tmp_path).append("gradcheck", check_payload(tmp_path, False, files={}))
    md = render_markdown(build_report(tmp_path))
    assert "No outcome recorded yet" in md and "Root cause" not in md
    assert "### FD check: record 0, FAILED" in md


def test_an_undone_patch_is_marked_and_a_damaged_ledger_is_flagged(finished):
    undo(finished)
    md = render_markdown(build_report(finished))
    assert "Patch record 3: sim.py (undone later)" in md
    path = finished / ".warpgrad" / "ledger.jsonl"
    path.write_bytes(
        path.read_bytes().replace(b"requires_grad, so its adjoint", b"requires_grad, so the adjoint")
    )
    md = render_markdown(build_report(finished))
    assert "the ledger failed verification" in md
    assert _numbers_not_in_ledger(md, finished) == set()


_CLI = "import typer; from warpgrad.cli.workspace import register; app = typer.Typer(); register(app); app()"


def test_the_report_command_prints_markdown_or_json_from_a_real_process(finished):
    out = finished / "REPORT.md"
    p = subprocess.run(
        [sys.executable, "-c", _CLI, "report", "-w", str(finished), "-o", str(out)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == out.read_text(encoding="utf-8") == render_markdown(build_report(finished))
    p = subprocess.run(
        [sys.executable, "-c", _CLI, "report", "--json", "-w", str(finished)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
        timeout=60,
    )
    data = json.loads(p.stdout)
    assert data["outcome"] == "fixed" and [c["role"] for c in data["checks"]] == ["before", "after"]
    assert data["diagnostic_files"][0]["path"] == "probe.py"


def test_the_report_command_on_a_missing_folder_exits_2_with_a_clear_error(tmp_path):
    for target in (tmp_path / "no-such-workspace", tmp_path / "a-file"):
        if target.name == "a-file":
            target.write_text("x", encoding="utf-8")
        p = subprocess.run([sys.executable, "-c", _CLI, "report", "-w", str(target)], capture_output=True,
                           text=True, encoding="utf-8", check=False, timeout=60)
        assert p.returncode == 2 and p.stdout == ""
        assert str(target) in p.stderr and ("does not exist" in p.stderr or "is not a folder" in p.stderr)
        g = subprocess.run([sys.executable, "-c", _CLI, "gate", "--outcome", "fixed", "-w", str(target)],
                           capture_output=True, text=True, encoding="utf-8", check=False, timeout=60)
        assert g.returncode == 2 and str(target) in g.stderr
    assert not (tmp_path / "no-such-workspace").exists()  # nothing was created on the way


def test_the_report_says_whether_the_ledger_is_signed(finished, tmp_path):
    md = render_markdown(build_report(finished))
    assert "every record signed with this machine's warpgrad key" in md and "NOT signed" not in md
    forge_append(finished, "note", {"text": "hi"})  # a writer without the key
    rep = build_report(finished)
    last = Ledger(finished).records()[-1].seq
    assert not rep.signed and rep.unsigned == [last]
    assert f"**Ledger NOT signed**: record(s) {last} carry no valid signature" in render_markdown(rep)
