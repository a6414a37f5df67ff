"""The evidence ledger: hash chain, head file, torn writes, concurrent writers (real files, real processes)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from warpgrad.tools.binding import head_path
from warpgrad.tools.ledger import Ledger, LedgerCorrupt


class _Result(BaseModel):
    ok: bool
    passed: bool | None
    max_rel_error: float | None
    files: dict[str, str]


def _lines(ws: Path) -> list[bytes]:
    return (ws / ".warpgrad" / "ledger.jsonl").read_bytes().splitlines(keepends=True)


def _write_lines(ws: Path, lines: list[bytes]) -> None:
    (ws / ".warpgrad" / "ledger.jsonl").write_bytes(b"".join(lines))


def _fill(ws: Path, n: int) -> Ledger:
    led = Ledger(ws)
    for i in range(n):
        led.append("run", {"i": i, "final_loss": 1.0 / (i + 1)})
    return led


def test_records_chain_by_hash_and_read_back_exactly_with_nan_kept(tmp_path):
    led = Ledger(tmp_path)
    a = led.append(
        "gradcheck", _Result(ok=True, passed=False, max_rel_error=math.nan, files={"sim.py": "ab"})
    )
    b = led.append("run", {"loss_trajectory": [3.0, math.inf], "script": Path("sim.py")})
    recs = led.records()
    assert [r.seq for r in recs] == [0, 1]
    assert recs[1].prev_hash == a.hash and recs[0].prev_hash == "0" * 64
    assert recs[0].files == {"sim.py": "ab"}  # taken from the payload's `files`
    assert math.isnan(recs[0].payload["max_rel_error"])
    assert recs[1].payload == {"loss_trajectory": [3.0, math.inf], "script": "sim.py"}
    assert recs[1].hash == b.hash == recs[1].compute_hash()
    assert led.verify().ok


def test_an_edited_record_is_detected(tmp_path):
    _fill(tmp_path, 3)
    lines = _lines(tmp_path)
    lines[1] = lines[1].replace(b'"final_loss":0.5', b'"final_loss":0.05')
    _write_lines(tmp_path, lines)
    check = Ledger(tmp_path).verify()
    assert not check.ok
    assert "record 1" in check.problems[0] and "edited" in check.problems[0]
    assert check.records == 1  # the intact prefix stays readable


def test_a_record_removed_from_the_middle_is_detected(tmp_path):
    _fill(tmp_path, 4)
    lines = _lines(tmp_path)
    del lines[2]
    _write_lines(tmp_path, lines)
    check = Ledger(tmp_path).verify()
    assert not check.ok and "removed" in check.problems[0]


def test_records_removed_from_the_end_are_detected_through_the_head(tmp_path):
    _fill(tmp_path, 4)
    _write_lines(tmp_path, _lines(tmp_path)[:2])  # a clean cut at a line boundary: the chain alone looks fine
    check = Ledger(tmp_path).verify()
    assert not check.ok
    assert "truncated" in check.problems[0]


def test_a_ledger_truncated_mid_record_keeps_its_prefix_and_reports_the_truncation(tmp_path):
    _fill(tmp_path, 3)
    data = b"".join(_lines(tmp_path))
    (tmp_path / ".warpgrad" / "ledger.jsonl").write_bytes(data[: len(data) - 25])
    led = Ledger(tmp_path)
    recs, check = led.read()
    assert [r.seq for r in recs] == [0, 1]
    assert check.torn_tail_bytes > 0
    assert not check.ok and "truncated" in check.problems[0]  # the head knows record 2 was complete
    with pytest.raises(LedgerCorrupt, match="Nothing was recorded"):
        led.append("run", {})


def test_a_torn_last_line_from_a_crash_is_benign_and_set_aside_on_the_next_append(tmp_path):
    led = _fill(tmp_path, 2)
    # A crash during the write of record 2: part of its line landed, the head was never updated.
    with open(tmp_path / ".warpgrad" / "ledger.jsonl", "ab") as f:
        f.write(b'{"seq":2,"time":"2026-')
    recs, check = led.read()
    assert check.ok and check.torn_tail_bytes == len(b'{"seq":2,"time":"2026-')
    assert "incomplete" in check.notes[0]
    assert len(recs) == 2
    rec = led.append("run", {"after": "crash"})
    assert rec.seq == 2
    recs, check = led.read()
    assert check.ok and check.torn_tail_bytes == 0 and len(recs) == 3
    assert (tmp_path / ".warpgrad" / "ledger.torn").read_bytes().startswith(b'{"seq":2')


def test_a_crash_between_the_write_and_the_head_update_is_benign(tmp_path):
    led = _fill(tmp_path, 2)
    head = head_path(tmp_path).read_bytes()
    led.append("run", {"x": 1})
    head_path(tmp_path).write_bytes(head)  # as if the process died before the rename
    check = led.verify()
    assert check.ok and "head was not updated" in check.notes[0]
    assert led.append("run", {"x": 2}).seq == 3
    assert led.verify().ok


def test_appending_to_a_corrupted_ledger_is_refused(tmp_path):
    _fill(tmp_path, 2)
    lines = _lines(tmp_path)
    lines[0] = lines[0].replace(b'"i":0', b'"i":7')
    _write_lines(tmp_path, lines)
    with pytest.raises(LedgerCorrupt, match="failed verification"):
        Ledger(tmp_path).append("run", {})


def test_a_deleted_or_garbled_head_is_reported(tmp_path):
    _fill(tmp_path, 3)
    head_path(tmp_path).write_text("{not json", encoding="utf-8")
    assert "unreadable" in Ledger(tmp_path).verify().problems[0]
    head_path(tmp_path).unlink()
    assert "no head for this one" in Ledger(tmp_path).verify().problems[0]


_WRITER = """
import sys
from pathlib import Path
from warpgrad.tools.ledger import Ledger
ws, who, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
led = Ledger(ws)
for i in range(n):
    led.append("run", {"writer": who, "i": i, "pad": "x" * 3000})
"""


def test_two_processes_appending_at_once_leave_a_valid_complete_ledger(tmp_path):
    n = 60
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), who, str(n)]) for who in "ab"]
    for p in procs:
        assert p.wait(timeout=120) == 0
    recs, check = Ledger(tmp_path).read()
    assert check.ok, check.problems
    assert [r.seq for r in recs] == list(range(2 * n))
    for who in "ab":
        assert [r.payload["i"] for r in recs if r.payload["writer"] == who] == list(range(n))
    # every line is one complete JSON record
    assert all(json.loads(line)["kind"] == "run" for line in _lines(tmp_path))


def test_summary_counts_kinds_and_reports_a_stale_last_check(tmp_path):
    (tmp_path / "sim.py").write_text("x = 1\n", encoding="utf-8")
    led = Ledger(tmp_path)
    led.append("gradcheck", {"ok": True, "passed": False, "signature": "zero", "files": {"sim.py": "0" * 64}})
    s = led.summary()
    assert s["kinds"] == {"gradcheck": 1} and s["verified"]
    assert s["last_gradcheck"]["stale_files"] == ["sim.py"]


def test_a_writer_killed_mid_stream_leaves_a_readable_ledger_that_accepts_more_records(tmp_path):
    import signal
    import time

    writer = _WRITER.replace('"x" * 3000', '"x" * 400_000').replace(
        "Ledger(ws)", "Ledger(ws)\nprint('go', flush=True)"
    )
    p = subprocess.Popen([sys.executable, "-c", writer, str(tmp_path), "k", "100000"], stdout=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline() == b"go\n"
    time.sleep(0.4)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    p.stdout.close()
    led = Ledger(tmp_path)
    recs, check = led.read()
    assert check.ok, check.problems  # at worst a torn tail or a head one record behind: both benign
    assert len(recs) >= 1
    assert led.append("run", {"after": "kill"}).seq == len(recs)
    assert led.verify().ok
