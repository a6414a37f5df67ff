"""Issue 24, item 2: links a script plants in `.warpgrad/` never make warpgrad write outside the workspace.

Each test plants one link (symbolic, or hard where a file is appended to) at a state file's name, pointing at
a file or folder outside the workspace, runs what opens that state file, and asserts that warpgrad refuses
with a message naming the link and that the outside target is byte-for-byte untouched (or not created)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from warpgrad.tools.ledger import Ledger
from warpgrad.tools.registry import ToolError
from warpgrad.tools.workspace import EditFileArgs, WriteFileArgs, edit_file, undo, write_file

SECRET = b"export PATH=/usr/bin  # the user's own file outside the workspace\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "sim.py").write_text("a = 1\nb = 1\n", encoding="utf-8")
    return w


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "home"
    d.mkdir()
    (d / ".bashrc").write_bytes(SECRET)
    return d


def _edit(ws: Path, old: str = "a = 1", new: str = "a = 2") -> None:
    edit_file(EditFileArgs(path="sim.py", old_text=old, new_text=new), ws)


def _refused(call, name: str) -> None:
    with pytest.raises(ToolError, match=rf"(?s){name}.*(symbolic link|hard links|not a folder).*Nothing was written"):
        call()


@pytest.mark.parametrize("hard", [False, True], ids=["symlink", "hardlink"])
def test_a_torn_tail_is_never_appended_through_a_planted_ledger_torn(ws, outside, hard):
    led = Ledger(ws)
    led.append("run", {"i": 0})
    with open(led.path, "ab") as f:
        f.write(b'{"seq":1,"ti')  # a torn last line: the next append moves it to ledger.torn
    torn = ws / ".warpgrad" / "ledger.torn"
    (os.link if hard else os.symlink)(outside / ".bashrc", torn)
    _refused(lambda: led.append("run", {"i": 1}), "ledger.torn")
    assert (outside / ".bashrc").read_bytes() == SECRET
    assert len(led.records()) == 1


def test_sprayed_head_temp_links_and_a_head_link_are_never_written_through(ws, outside):
    led = Ledger(ws)
    led.append("run", {"i": 0})
    sd = ws / ".warpgrad"
    for pid in [os.getpid(), *range(1, 400)]:  # every temp name the old writer could have chosen
        os.symlink(outside / ".bashrc", sd / f"ledger.head.{pid}.tmp")
    (sd / "ledger.head").unlink(missing_ok=True)
    os.symlink(outside / ".bashrc", sd / "ledger.head")
    for i in range(1, 4):
        led.append("run", {"i": i})
    assert (outside / ".bashrc").read_bytes() == SECRET
    check = led.verify()
    assert check.ok and check.records == 4 and check.bound


@pytest.mark.parametrize("lock", ["ledger.lock", "edit.lock", "state.lock"])
def test_a_lock_file_is_never_created_through_a_planted_link(ws, outside, lock):
    Ledger(ws).append("run", {"i": 0})
    target = outside / f"created-by-{lock}"
    (ws / ".warpgrad" / lock).unlink(missing_ok=True)
    os.symlink(target, ws / ".warpgrad" / lock)
    _refused(lambda: _edit(ws), lock)
    assert not target.exists()
    assert (ws / "sim.py").read_text(encoding="utf-8") == "a = 1\nb = 1\n"


def test_a_ledger_that_is_a_link_is_neither_read_nor_appended_to(ws, outside):
    (ws / ".warpgrad").mkdir()
    os.symlink(outside / ".bashrc", ws / ".warpgrad" / "ledger.jsonl")
    _refused(lambda: Ledger(ws).append("run", {"i": 0}), "ledger.jsonl")
    _refused(lambda: Ledger(ws).verify(), "ledger.jsonl")
    assert (outside / ".bashrc").read_bytes() == SECRET


def test_a_backup_folder_of_the_next_patch_that_is_a_link_gets_no_copy(ws, outside):
    (ws / ".warpgrad" / "backups").mkdir(parents=True)
    os.symlink(outside, ws / ".warpgrad" / "backups" / "0001")
    _refused(lambda: _edit(ws), "0001")
    assert sorted(p.name for p in outside.iterdir()) == [".bashrc"]
    assert (ws / "sim.py").read_text(encoding="utf-8") == "a = 1\nb = 1\n"


def test_an_undone_folder_that_is_a_link_gets_no_copy_and_undo_changes_nothing(ws, outside):
    _edit(ws)
    os.symlink(outside, ws / ".warpgrad" / "backups" / "0001-undone")
    _refused(lambda: undo(ws), "0001-undone")
    assert sorted(p.name for p in outside.iterdir()) == [".bashrc"]
    assert (ws / "sim.py").read_text(encoding="utf-8") == "a = 2\nb = 1\n"


@pytest.mark.parametrize("hard", [False, True], ids=["symlink", "hardlink"])
def test_a_backup_index_that_is_a_link_is_never_appended_to(ws, outside, hard):
    (ws / ".warpgrad" / "backups").mkdir(parents=True)
    (outside / ".profile").write_bytes(b"")  # empty: reads as an empty index, so only the append could hurt
    (os.link if hard else os.symlink)(outside / ".profile", ws / ".warpgrad" / "backups" / "index.jsonl")
    with pytest.raises(ToolError, match=r"index\.jsonl"):
        _edit(ws)
    assert (outside / ".profile").read_bytes() == b""
    assert (ws / "sim.py").read_text(encoding="utf-8") == "a = 1\nb = 1\n"


def test_a_staging_folder_that_is_a_link_receives_no_temp_file(ws, outside):
    Ledger(ws).append("run", {"i": 0})
    os.symlink(outside, ws / ".warpgrad" / "tmp")
    _refused(lambda: write_file(WriteFileArgs(path="probe.py", content="x = 1\n"), ws), "tmp")
    assert sorted(p.name for p in outside.iterdir()) == [".bashrc"]
    assert not (ws / "probe.py").exists()


def test_a_created_list_that_is_a_link_is_neither_read_nor_replaced_through(ws, outside):
    Ledger(ws).append("run", {"i": 0})
    os.symlink(outside / ".bashrc", ws / ".warpgrad" / "created.json")
    _refused(lambda: write_file(WriteFileArgs(path="probe.py", content="x = 1\n"), ws), "created.json")
    assert (outside / ".bashrc").read_bytes() == SECRET


def test_the_state_folder_itself_as_a_link_is_refused_before_anything_is_written(ws, outside):
    os.symlink(outside, ws / ".warpgrad")
    _refused(lambda: Ledger(ws).append("run", {"i": 0}), ".warpgrad")
    _refused(lambda: _edit(ws), ".warpgrad")
    assert sorted(p.name for p in outside.iterdir()) == [".bashrc"]
