"""Workspace state that cannot be turned against the user: crafted `.warpgrad/`, corrupt backups, races, kills."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from forge import forge_append

from warpgrad.agent.context import run_tool
from warpgrad.tools.ledger import Ledger
from warpgrad.tools.registry import ToolError, load_tools
from warpgrad.tools.workspace import (
    MAX_EDIT_CHARS,
    ApplyPatchArgs,
    EditFileArgs,
    WriteFileArgs,
    apply_patch,
    edit_file,
    undo,
    write_file,
)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "sim.py").write_text("a = 1\nb = 1\n", encoding="utf-8")
    return w


def _craft(ws: Path, files: list[dict], backups: dict[str, bytes], op: str = "0001") -> None:
    """A `.warpgrad/` as a hostile repository would ship it: an index, backup files, and a matching ledger."""
    bdir = ws / ".warpgrad" / "backups"
    bdir.mkdir(parents=True, exist_ok=True)
    for rel, data in backups.items():
        p = bdir / op / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    (bdir / "index.jsonl").write_text(json.dumps({"op": op, "tool": "edit_file", "files": files}) + "\n",
                                      encoding="utf-8")
    # The ledger's hash chain has no secret: a crafted repository can carry a valid one.
    Ledger(ws).append("patch", {"paths": [f["path"] for f in files], "backup_op": op,
                                "before": {f["path"]: f["before"] for f in files},
                                "after": {f["path"]: f["after"] for f in files}})


# 1 -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rel", ["../planted.txt", "/tmp/warpgrad-planted-abs.txt", ".warpgrad/ledger.jsonl"])
def test_undo_never_creates_a_file_outside_the_workspace_from_a_crafted_index(ws, rel):
    payload = b"planted\n"
    outside = (ws / rel).resolve() if not rel.startswith("/") else Path(rel)
    outside.unlink(missing_ok=True)
    (ws / "victim").mkdir()
    _craft(ws, [{"path": rel, "before": sha(payload), "after": sha(b"")}], {"victim/../x": payload})
    with pytest.raises(ToolError, match=r"outside the workspace|inside \.warpgrad|not undone|damaged"):
        undo(ws, force=True)
    if not rel.startswith(".warpgrad"):
        assert not outside.exists()


def test_undo_never_overwrites_a_file_outside_the_workspace_through_a_link(ws, tmp_path):
    target = tmp_path / "users-file.txt"
    target.write_bytes(b"precious\n")
    (ws / "link").symlink_to(tmp_path)
    _craft(ws, [{"path": "link/users-file.txt", "before": sha(b"evil\n"), "after": sha(b"precious\n")}],
           {"link/users-file.txt": b"evil\n"})
    with pytest.raises(ToolError, match="symbolic link"):
        undo(ws, force=True)
    assert target.read_bytes() == b"precious\n"


def test_a_state_folder_that_is_a_link_out_of_the_workspace_is_refused(ws, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (ws / ".warpgrad").symlink_to(elsewhere)
    with pytest.raises(ToolError, match="symbolic link"):
        undo(ws)
    with pytest.raises(ToolError, match="symbolic link"):
        edit_file(EditFileArgs(path="sim.py", old_text="a = 1", new_text="a = 2"), ws)
    assert list(elsewhere.iterdir()) == [] or not (elsewhere / "backups").exists()


def test_an_index_entry_the_ledger_does_not_record_is_not_undone(ws):
    bdir = ws / ".warpgrad" / "backups"
    (bdir / "0001").mkdir(parents=True)
    (bdir / "0001" / "sim.py").write_bytes(b"evil = 1\n")
    now = (ws / "sim.py").read_bytes()
    (bdir / "index.jsonl").write_text(json.dumps({"op": "0001", "tool": "edit_file", "files": [
        {"path": "sim.py", "before": sha(b"evil = 1\n"), "after": sha(now)}]}) + "\n", encoding="utf-8")
    with pytest.raises(ToolError, match="no matching patch record in the evidence ledger"):
        undo(ws)
    assert (ws / "sim.py").read_bytes() == now


# 3 -------------------------------------------------------------------------------------------------
def test_a_corrupted_backup_is_not_restored(ws):
    edit_file(EditFileArgs(path="sim.py", old_text="a = 1", new_text="a = 2"), ws)
    (ws / ".warpgrad" / "backups" / "0001" / "sim.py").write_bytes(b"GARBAGE")
    with pytest.raises(ToolError, match="corrupt"):
        undo(ws)
    assert (ws / "sim.py").read_text(encoding="utf-8") == "a = 2\nb = 1\n"
    r = subprocess.run([sys.executable, "-m", "warpgrad", "undo", "--workspace", str(ws)], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 1 and "corrupt" in r.stderr and "Traceback" not in r.stderr


def test_undo_keeps_what_it_replaces(ws):
    edit_file(EditFileArgs(path="sim.py", old_text="a = 1", new_text="a = 2"), ws)
    undo(ws)
    assert (ws / ".warpgrad" / "backups" / "0001-undone" / "sim.py").read_text(encoding="utf-8") == "a = 2\nb = 1\n"
    assert (ws / "sim.py").read_text(encoding="utf-8") == "a = 1\nb = 1\n"


# 4 -------------------------------------------------------------------------------------------------
def test_two_simultaneous_edits_of_one_file_both_land(ws):
    for run in range(6):
        (ws / "sim.py").write_text("a = 1\nb = 1\n", encoding="utf-8")
        start = threading.Barrier(2)
        errors: list[BaseException] = []

        def edit(old: str, new: str, start: threading.Barrier = start, errors: list = errors) -> None:
            start.wait()
            try:
                edit_file(EditFileArgs(path="sim.py", old_text=old, new_text=new), ws)
            except BaseException as e:  # noqa: BLE001 -- reported below
                errors.append(e)

        threads = [threading.Thread(target=edit, args=a) for a in (("a = 1", "a = 2"), ("b = 1", "b = 2"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert (ws / "sim.py").read_text(encoding="utf-8") == "a = 2\nb = 2\n", f"run {run}"
    assert Ledger(ws).verify().ok


# 7 -------------------------------------------------------------------------------------------------
KILL_AT = """
import os, signal, sys
from pathlib import Path
import warpgrad.tools.backups as b
from warpgrad.tools.workspace import EditFileArgs, edit_file
where = sys.argv[2]
if where == "before_ledger":  # the files are written, the signed intent is in, the patch record is not
    real_append = b.Ledger.append
    def append(self, kind, *a, **k):
        if kind == "patch":
            os.kill(os.getpid(), signal.SIGKILL)
        return real_append(self, kind, *a, **k)
    b.Ledger.append = append
elif where == "before_confirm":
    b.Backups.confirm = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
elif where == "mid_write":
    real = os.replace
    def killed(src, dst, **kw):
        if str(dst).endswith("sim.py") and str(src).endswith(b.TMP_SUFFIX):  # the workspace file, not its backup
            os.kill(os.getpid(), signal.SIGKILL)
        return real(src, dst, **kw)
    b.os.replace = killed
edit_file(EditFileArgs(path="sim.py", old_text="a = 1", new_text="a = 2" + "#" * 20000), Path(sys.argv[1]))
"""


def _killed_edit(ws: Path, where: str) -> None:
    r = subprocess.run([sys.executable, "-c", KILL_AT, str(ws), where], capture_output=True, text=True,
                       check=False)
    assert r.returncode == -9, r.stderr


@pytest.mark.parametrize("where", ["mid_write", "before_ledger"])
def test_a_patch_killed_before_its_ledger_record_is_rolled_back_and_leaves_no_temp_file(ws, where):
    _killed_edit(ws, where)
    # The next edit finds the interrupted one: file rolled back, temp file removed, nothing recorded.
    edit_file(EditFileArgs(path="sim.py", old_text="b = 1", new_text="b = 3"), ws)
    assert (ws / "sim.py").read_text(encoding="utf-8") == "a = 1\nb = 3\n"
    assert list((ws / ".warpgrad" / "tmp").iterdir()) == []
    assert not list(ws.rglob("*.wgtmp"))
    patches = [r for r in Ledger(ws).read()[0] if r.kind == "patch"]
    assert len(patches) == 1 and patches[0].payload["backup_op"] == "0002"
    res = undo(ws)  # undo finds the real last patch, not the orphan
    assert res.ops == ["0002"] and (ws / "sim.py").read_text(encoding="utf-8") == "a = 1\nb = 1\n"


def test_a_patch_killed_after_its_ledger_record_is_confirmed_and_can_be_undone(ws):
    _killed_edit(ws, "before_confirm")
    assert (ws / "sim.py").read_text(encoding="utf-8").startswith("a = 2")
    res = undo(ws)
    assert res.ops == ["0001"] and res.recovered and (ws / "sim.py").read_text(encoding="utf-8") == "a = 1\nb = 1\n"


def test_undo_without_a_backup_folder_or_with_a_damaged_index_says_so(ws):
    edit_file(EditFileArgs(path="sim.py", old_text="a = 1", new_text="a = 2"), ws)
    index = ws / ".warpgrad" / "backups" / "index.jsonl"
    index.write_text(index.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    with pytest.raises(ToolError, match=r"line 3 of .*index\.jsonl is damaged"):
        undo(ws)
    import shutil

    shutil.rmtree(ws / ".warpgrad" / "backups")
    with pytest.raises(ToolError, match="nothing to undo"):
        undo(ws)


def test_a_refused_edit_quotes_the_proposed_line_not_the_one_on_disk(ws, monkeypatch):
    monkeypatch.chdir(ws)  # where Python would look the file name up to quote its line
    with pytest.raises(ToolError) as e:
        edit_file(EditFileArgs(path="sim.py", old_text="b = 1", new_text="b = (1"), ws)
    assert "b = (1" in str(e.value)
    (ws / "sim.py").write_text("a = 1\nb = 1\nc = 1\n", encoding="utf-8")
    with pytest.raises(ToolError) as e:
        edit_file(EditFileArgs(path="sim.py", old_text="c = 1", new_text="c = 1 +"), ws)
    assert "c = 1 +" in str(e.value)


def test_edits_have_a_size_limit_with_a_clear_error(ws):
    out, is_error, _ = run_tool(load_tools(), "edit_file",
                                {"path": "sim.py", "old_text": "a = 1", "new_text": "x" * (MAX_EDIT_CHARS + 1)}, ws)
    assert is_error and "new_text" in out and str(MAX_EDIT_CHARS) in out
    out, is_error, _ = run_tool(load_tools(), "write_file", {"path": "big.txt", "content": "x" * 30_000_000}, ws)
    assert is_error and "content" in out
    (ws / "sim.py").write_text("a = 1\n" + "# filler\n" * 220_000, encoding="utf-8")
    with pytest.raises(ToolError, match="more than"):
        edit_file(EditFileArgs(path="sim.py", old_text="a = 1", new_text="a = 1\n" + "#" * 190_000,
                               replace_all=False), ws)
    ledger = ws / ".warpgrad" / "ledger.jsonl"
    assert not ledger.exists() or ledger.stat().st_size < 1_000_000


def test_files_warpgrad_creates_get_the_usual_mode_not_0600(ws):
    old = os.umask(0o022)
    try:
        write_file(WriteFileArgs(path="probe.py", content="x = 1\n"), ws)
        apply_patch(ApplyPatchArgs(diff="--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+y = 2\n"), ws)
    finally:
        os.umask(old)
    for name in ("probe.py", "new.py"):
        assert stat.S_IMODE((ws / name).stat().st_mode) == 0o644, name


def test_a_crafted_created_list_does_not_make_a_users_file_overwritable(ws):
    data = (ws / "sim.py").read_bytes()
    (ws / ".warpgrad").mkdir()
    (ws / ".warpgrad" / "created.json").write_text(json.dumps({"sim.py": sha(data)}), encoding="utf-8")
    with pytest.raises(ToolError, match="never recorded warpgrad writing it"):
        write_file(WriteFileArgs(path="sim.py", content="owned = 1\n"), ws)
    assert (ws / "sim.py").read_bytes() == data
    write_file(WriteFileArgs(path="probe.py", content="x = 1\n"), ws)
    write_file(WriteFileArgs(path="probe.py", content="x = 2\n"), ws)  # its own file stays rewritable
    assert (ws / "probe.py").read_text(encoding="utf-8") == "x = 2\n"


def test_an_unsigned_file_record_does_not_make_a_users_file_overwritable(ws):
    data = (ws / "sim.py").read_bytes()
    Ledger(ws).append("run", {"i": 0})
    (ws / ".warpgrad" / "created.json").write_text(json.dumps({"sim.py": sha(data)}), encoding="utf-8")
    forge_append(ws, "file", {"path": "sim.py", "sha256": sha(data)}, files={"sim.py": sha(data)})
    with pytest.raises(ToolError, match="never recorded warpgrad writing it"):
        write_file(WriteFileArgs(path="sim.py", content="owned = 1\n"), ws)
    assert (ws / "sim.py").read_bytes() == data
