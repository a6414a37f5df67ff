"""Issue 24, item 3: the ledger's trust is bound to its workspace and to its whole history.

Truncation (records cut from the end and `.warpgrad/ledger.head` rewritten to match), transplant (another
workspace's signed ledger copied in) and forgery (a record without a signature) are each detected, and
the gate accepts no outcome from them; a ledger written before the binding still reads, marked unbound."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from forge import forge_append
from test_gate import PROBE, SIM, build_fixed_chain

from warpgrad.tools.finish import FinishArgs, finish
from warpgrad.tools.gate import check_finish
from warpgrad.tools.ledger import Ledger, LedgerCorrupt
from warpgrad.tools.registry import ToolError
from warpgrad.tools.workspace import WriteFileArgs, write_file


def _fixed_workspace(ws: Path) -> Path:
    ws.mkdir()
    (ws / "sim.py").write_text(SIM, encoding="utf-8")
    write_file(WriteFileArgs(path="probe.py", content=PROBE, purpose="FD probe"), ws)
    build_fixed_chain(ws)
    assert check_finish(ws, "fixed").accepted  # the honest history is enough on its own
    return ws


@pytest.fixture
def fixed_ws(tmp_path: Path) -> Path:
    return _fixed_workspace(tmp_path / "a")


def _g001(ws: Path, outcome: str, needle: str) -> None:
    gate = check_finish(ws, outcome)
    assert not gate.accepted
    assert any("G001" in m and needle in m for m in gate.missing), gate.missing


def test_records_cut_from_the_end_with_the_workspace_head_rewritten_are_detected(fixed_ws):
    led = Ledger(fixed_ws)
    records = led.records()
    keep = records[:-3]  # the improving rerun, the tracker and the passing check go
    led.path.write_bytes(b"".join(line + b"\n" for line in led.path.read_bytes().splitlines()[: len(keep)]))
    # What a script could do with the old head inside the workspace: make it agree with the cut ledger.
    (fixed_ws / ".warpgrad" / "ledger.head").write_text(json.dumps({"seq": keep[-1].seq, "hash": keep[-1].hash}))
    check = led.verify()
    assert not check.ok and check.records == len(keep)
    assert "truncated" in check.problems[0] and "outside the workspace" in check.problems[0]
    for outcome in ("diagnosis_only", "gradients_correct"):
        _g001(fixed_ws, outcome, "truncated")
    with pytest.raises(LedgerCorrupt, match="truncated"):
        led.append("run", {"after": "the cut"})


def test_a_removed_ledger_is_detected_until_a_person_starts_a_fresh_one(fixed_ws):
    led = Ledger(fixed_ws)
    led.path.unlink()
    (fixed_ws / ".warpgrad" / "ledger.head").unlink(missing_ok=True)
    check = led.verify()
    assert not check.ok and "truncated" in check.problems[0]
    with pytest.raises(LedgerCorrupt, match="start_fresh"):
        led.append("gradcheck", {"passed": True})
    led.start_fresh()  # a person's decision, outside any script's reach
    led.append("run", {"i": 0})
    assert led.verify().ok and led.verify().bound


def test_another_workspaces_signed_ledger_copied_in_is_not_this_workspaces_evidence(fixed_ws, tmp_path):
    other = tmp_path / "b"
    other.mkdir()
    for name in ("sim.py", "probe.py"):  # the very same files: only the binding tells the histories apart
        shutil.copy2(fixed_ws / name, other / name)
    shutil.copytree(fixed_ws / ".warpgrad", other / ".warpgrad")
    check = Ledger(other).verify()
    assert check.signed  # every record carries a valid signature under this machine's key...
    assert not check.ok and not check.bound  # ...but names the workspace it was written in
    assert "another workspace" in check.problems[0]
    _g001(other, "fixed", "another workspace")
    with pytest.raises(ToolError, match="another workspace"):
        finish(FinishArgs(outcome="fixed", summary="copied from elsewhere"), other)
    assert check_finish(fixed_ws, "fixed").accepted  # the original is untouched


def test_a_transplant_is_detected_even_when_this_workspace_wrote_records_of_its_own(fixed_ws, tmp_path):
    other = tmp_path / "b"
    other.mkdir()
    shutil.copy2(fixed_ws / "sim.py", other / "sim.py")
    Ledger(other).append("run", {"final_loss": 8.0})  # b has a history (and a head) of its own
    shutil.copy2(fixed_ws / ".warpgrad" / "ledger.jsonl", other / ".warpgrad" / "ledger.jsonl")
    problems = " ".join(Ledger(other).verify().problems)
    assert "another workspace" in problems and "does not match" in problems
    _g001(other, "fixed", "another workspace")


def test_an_unsigned_forged_record_is_detected_and_refused(fixed_ws):
    seq = forge_append(fixed_ws, "gradcheck", {"passed": True, "ok": True})
    check = Ledger(fixed_ws).verify()
    assert check.unsigned == [seq] and not check.signed
    _g001(fixed_ws, "fixed", f"record(s) {seq} carry no valid signature")
    with pytest.raises(ToolError, match="refused"):
        finish(FinishArgs(outcome="fixed", summary="a forged passing check"), fixed_ws)


def test_a_ledger_written_before_the_binding_reads_and_is_marked_unbound(tmp_path, monkeypatch):
    fixture = Path(__file__).parent / "fixtures" / "ledger_v1"
    shutil.copytree(fixture / "key", tmp_path / "key")
    monkeypatch.setenv("WARPGRAD_KEY_DIR", str(tmp_path / "key"))
    shutil.copytree(fixture / "ws", tmp_path / "ws")
    led = Ledger(tmp_path / "ws")
    records, check = led.read()
    assert check.ok and check.signed and not check.bound
    assert check.unbound == [r.seq for r in records] and records
    assert any("unbound" in n for n in check.notes)
    rec = led.append("run", {"after": "the upgrade"})  # new records are bound; the old ones stay marked
    check = led.verify()
    assert check.ok and rec.workspace == check.workspace_id and check.unbound == [r.seq for r in records]


def test_evidence_from_records_written_before_the_binding_proves_no_outcome(tmp_path, monkeypatch):
    """A signed old-format ledger verifies, but nothing ties it to this workspace (one copied from another
    workspace reads the same): the gate names the unbound records it would have used and asks for new ones."""
    fixture = Path(__file__).parent / "fixtures" / "ledger_v1"
    shutil.copytree(fixture / "key", tmp_path / "key")
    monkeypatch.setenv("WARPGRAD_KEY_DIR", str(tmp_path / "key"))
    shutil.copytree(fixture / "ws", tmp_path / "ws")
    gate = check_finish(tmp_path / "ws", "fixed")
    assert gate.evidence.get("failing_check") == 0
    assert any("G001" in m and "record(s) 0 were written before ledgers named their workspace" in m
               for m in gate.missing), gate.missing
