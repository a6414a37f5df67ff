"""Issue 24, item 3 (report side): the report headlines only what it re-verified when it was built.

"hash chain intact, every record signed" needs the whole verification to pass (chain, workspace, the head
kept outside the workspace); "accepted by the evidence gate" needs a signed finish record in a verified
ledger. A forged finish, a cut ledger and a transplanted one get neither."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from forge import forge_append
from test_gate import PROBE, SIM, build_fixed_chain

from warpgrad.tools.finish import FinishArgs, finish
from warpgrad.tools.ledger import Ledger
from warpgrad.tools.registry import ToolError
from warpgrad.tools.report import build_report, render_markdown, write_report
from warpgrad.tools.workspace import WriteFileArgs, write_file

INTACT = "hash chain intact, every record signed"
ACCEPTED = "accepted by the evidence gate"


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    ws = tmp_path / "a"
    ws.mkdir()
    (ws / "sim.py").write_text(SIM, encoding="utf-8")
    write_file(WriteFileArgs(path="probe.py", content=PROBE, purpose="FD probe"), ws)
    build_fixed_chain(ws)
    return ws


def _md(ws: Path) -> str:
    return render_markdown(build_report(ws))


def test_an_accepted_signed_finish_is_headlined_as_accepted(chain):
    finish(FinishArgs(outcome="fixed", summary="y lacked requires_grad on the taped path"), chain)
    md = _md(chain)
    assert ACCEPTED in md and INTACT in md and "bound to this workspace" in md


def test_an_unsigned_forged_finish_is_never_headlined_as_accepted(chain):
    seq = forge_append(chain, "finish", {"outcome": "fixed", "summary": "forged by a script", "evidence": {}})
    md = _md(chain)
    assert ACCEPTED not in md and INTACT not in md
    assert f"finish record {seq} claims `fixed`" in md and "NOT verified" in md


def test_a_cut_ledger_with_its_workspace_head_rewritten_is_not_called_intact(chain):
    finish(FinishArgs(outcome="fixed", summary="y lacked requires_grad on the taped path"), chain)
    led = Ledger(chain)
    records = led.records()
    lines = led.path.read_bytes().splitlines()
    cut = [i for i, r in enumerate(records) if r.kind == "gradcheck"][-1]  # the passing check goes, the finish stays
    led.path.write_bytes(b"".join(line + b"\n" for i, line in enumerate(lines) if i < cut))
    (chain / ".warpgrad" / "ledger.head").write_text(json.dumps({"seq": cut - 1, "hash": records[cut - 1].hash}))
    md = _md(chain)
    assert INTACT not in md and "failed verification" in md


def test_a_transplanted_ledger_with_its_finish_is_not_headlined(chain, tmp_path):
    finish(FinishArgs(outcome="fixed", summary="y lacked requires_grad on the taped path"), chain)
    other = tmp_path / "b"
    other.mkdir()
    shutil.copytree(chain / ".warpgrad", other / ".warpgrad")
    md = _md(other)
    assert ACCEPTED not in md and INTACT not in md
    with pytest.raises(ToolError, match="another workspace"):
        finish(FinishArgs(outcome="fixed", summary="claimed again over the copy"), other)


def test_the_report_files_are_never_written_through_planted_links(chain, tmp_path):
    outside = tmp_path / "home"
    outside.mkdir()
    (outside / ".bashrc").write_bytes(b"keep me\n")
    for name in ("report.md", "report.json"):
        (chain / ".warpgrad" / name).unlink(missing_ok=True)
        os.symlink(outside / ".bashrc", chain / ".warpgrad" / name)
    md = write_report(chain)
    assert (outside / ".bashrc").read_bytes() == b"keep me\n"
    assert not md.is_symlink() and md.read_text(encoding="utf-8").startswith("# warpgrad report")
