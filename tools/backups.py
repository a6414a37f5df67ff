"""Backups, write-ahead patches and `undo`: every change warpgrad makes to a user's file can be taken back.

The state lives in `.warpgrad/` and may come from anywhere (a repository the user cloned), so nothing
read from it is trusted: every path in the backup index is confined exactly like a tool argument, a
backup is restored only when its sha256 is the one recorded, and a patch is undone only when the
evidence ledger holds the same patch (same backup id, same before/after hashes).

A patch is written ahead: the backups and an `intent` line go to the index, then the files are
written, then the ledger record, then a `confirmed` line. A process killed in between leaves an
intent without a confirmation; the next patch or undo (`recover`) finds it and either confirms it
(the ledger has the record) or rolls the files back from the verified backups and marks it
`aborted`. So a file is never patched without a ledger record, and undo never sees half a patch.

Edits are serialized by one workspace-wide lock (`edit_lock`) held from reading the file to the
ledger record: simpler than per-file locks (undo and multi-file patches span files, so per-file
locks would need an ordering) and edits take milliseconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from .ledger import STATE_DIR, Ledger, LedgerCorrupt, file_lock, sha256_file, state_dir
from .paths import resolve_path
from .registry import ToolError

OP_RE = re.compile(r"^\d{4,9}$")
TMP_SUFFIX = ".wgtmp"


class BackupIndexCorrupt(ToolError):
    """`.warpgrad/backups/index.jsonl` cannot be read; nothing is restored from it."""


# ---------------------------------------------------------------------------------------------------
# State dir, locks, atomic writes
# ---------------------------------------------------------------------------------------------------


def checked_state_dir(workspace: Path) -> Path:
    """`.warpgrad/` of the workspace, refusing one that is a link (a crafted state dir could lead out)."""
    d = state_dir(workspace)
    if d.is_symlink() or not d.resolve().is_relative_to(Path(workspace).resolve()):
        raise ToolError(f"{d} is a symbolic link that leads to {d.resolve()}; warpgrad keeps its state only "
                        f"inside the workspace. Remove the link (or move it aside) and try again")
    return d


@contextlib.contextmanager
def edit_lock(workspace: Path) -> Iterator[list[str]]:
    """Held from reading a file to recording its change: two edits at once cannot lose one.

    On entry it finishes what a killed edit left (`recover`), before the caller reads any file, and
    yields what it did.
    """
    with file_lock(checked_state_dir(workspace) / "edit.lock"):
        with state_lock(workspace):
            done = recover(workspace)
        yield done


def state_lock(workspace: Path) -> contextlib.AbstractContextManager[None]:
    """Guards created.json and the backup index (taken inside `edit_lock`, never around it)."""
    return file_lock(checked_state_dir(workspace) / "state.lock")


def _umask() -> int:
    # os.umask() can only be read by setting it, which races with other threads; /proc has it.
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def default_mode() -> int:
    """The mode `open()` would give a new file (0o666 less the umask), not mkstemp's 0o600."""
    return 0o666 & ~_umask()


def tmp_dir(workspace: Path) -> Path:
    """`.warpgrad/tmp/`: where atomic writes stage their data, so a killed write leaves nothing in the tree."""
    d = checked_state_dir(workspace) / "tmp"
    d.mkdir(exist_ok=True)
    return d


def atomic_write(path: Path, data: bytes, mode: int | None = None, *, staging: Path | None = None) -> None:
    """Write `data` to `path` through a temporary file and a rename, so readers never see half a file.

    Args:
        path: The target.
        data: Its new content.
        mode: Permission bits (default: those of a file `open()` would create).
        staging: Folder for the temporary file (`tmp_dir(workspace)`); the target's folder when None
            or on another file system (a rename cannot cross one).
    """
    where = path.parent
    if staging is not None and os.stat(staging).st_dev == os.stat(path.parent).st_dev:
        where = staging
    tmp = where / f"{os.getpid()}-{secrets.token_hex(6)}-{path.name}{TMP_SUFFIX}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, default_mode() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def clean_stale_temps(workspace: Path) -> list[str]:
    """Remove staged temp files whose writer process is gone (killed mid-write); returns their names."""
    removed = []
    for p in tmp_dir(workspace).iterdir():
        pid = p.name.split("-", 1)[0]
        if not (p.name.endswith(TMP_SUFFIX) and pid.isdigit()):
            continue
        try:
            os.kill(int(pid), 0)
            continue  # its writer still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            removed.append(p.name)
    return removed


# ---------------------------------------------------------------------------------------------------
# Files warpgrad created
# ---------------------------------------------------------------------------------------------------


def _created_path(workspace: Path) -> Path:
    return checked_state_dir(workspace) / "created.json"


def created_files(workspace: Path) -> dict[str, str]:
    """Files warpgrad created in the workspace: relative path -> sha256 when warpgrad last wrote it.

    Raises:
        ToolError: `.warpgrad/created.json` is not a JSON object of path -> hash.
    """
    p = _created_path(workspace)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ToolError(f"{p} is not valid JSON ({e}); move it aside to continue") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise ToolError(f"{p} is not a mapping of path -> sha256; move it aside to continue")
    return data


def save_created(workspace: Path, created: dict[str, str]) -> None:
    atomic_write(_created_path(workspace), json.dumps(created, indent=1, sort_keys=True).encode("utf-8"),
                 staging=tmp_dir(workspace))


def mark_created(workspace: Path, rel: str, sha: str) -> None:
    """Record that warpgrad created (or rewrote) `rel` with content hash `sha`."""
    with state_lock(workspace):
        c = created_files(workspace)
        c[rel] = sha
        save_created(workspace, c)


def require_intact_ledger(workspace: Path) -> None:
    """Refuse a change that could not be recorded: a damaged ledger takes no more records.

    Raises:
        LedgerCorrupt: The ledger failed verification.
    """
    check = Ledger(workspace).verify()
    if not check.ok:
        raise LedgerCorrupt("not done: the evidence ledger failed verification (" + "; ".join(check.problems)
                            + "), so this change could not be recorded. A person must inspect .warpgrad/ledger.jsonl")


# ---------------------------------------------------------------------------------------------------
# The backup index
# ---------------------------------------------------------------------------------------------------


class BackupFile(BaseModel):
    """One file of a patch: its workspace-relative path and its content hash before and after."""

    path: str = Field(min_length=1)
    before: str | None = Field(description="sha256 before the patch; None when the patch created the file.")
    after: str


class IndexLine(BaseModel):
    """One line of `.warpgrad/backups/index.jsonl`: a patch (`op`) or an event about one."""

    op: str | None = Field(None, pattern=OP_RE.pattern)
    tool: str | None = None
    files: list[BackupFile] = Field(default_factory=list)
    intent: bool = Field(False, description="Written before the files; a `confirmed` line follows the ledger record.")
    confirmed: str | None = Field(None, pattern=OP_RE.pattern)
    aborted: str | None = Field(None, pattern=OP_RE.pattern)
    undo_of: str | None = Field(None, pattern=OP_RE.pattern)


class BackupEntry(BaseModel):
    """A patch as the index tells it, events folded in."""

    op: str
    tool: str | None
    files: list[BackupFile]
    state: str = Field(description="pending (intent only), applied, aborted.")
    undone: bool = False


class Backups:
    """`.warpgrad/backups/`: a copy of every file before a patch, plus the index `undo` reads."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = Path(workspace).resolve()
        self.dir = checked_state_dir(self.workspace) / "backups"
        if self.dir.is_symlink():
            raise ToolError(f"{self.dir} is a symbolic link; warpgrad does not follow links in its own state")
        self.dir.mkdir(exist_ok=True)
        self.index = self.dir / "index.jsonl"

    def entries(self) -> list[BackupEntry]:
        """Every patch in the index, in order.

        Raises:
            BackupIndexCorrupt: A line is not JSON or not an index line; the message names it.
        """
        if not self.index.exists():
            return []
        if self.index.is_symlink() or not self.index.is_file():
            raise BackupIndexCorrupt(f"{self.index} is not a regular file; nothing is restored from it")
        by_op: dict[str, BackupEntry] = {}
        try:
            text = self.index.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise BackupIndexCorrupt(f"{self.index} is not UTF-8 text ({e}); nothing is restored from it") from None
        for n, raw in enumerate(text.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                line = IndexLine.model_validate_json(raw)
            except ValidationError as e:
                first = e.errors()[0]
                where = ".".join(str(x) for x in first["loc"]) or "the line"
                raise BackupIndexCorrupt(
                    f"line {n} of {self.index} is damaged ({where}: {first['msg']}); undo reads nothing from a "
                    "damaged index. Restore the files from version control, or move .warpgrad/backups aside"
                ) from None
            if line.op is not None:
                state = "pending" if line.intent else "applied"
                by_op[line.op] = BackupEntry(op=line.op, tool=line.tool, files=line.files, state=state)
            for ref, change in ((line.confirmed, {"state": "applied"}), (line.aborted, {"state": "aborted"}),
                                (line.undo_of, {"undone": True})):
                if ref is not None and ref in by_op:
                    by_op[ref] = by_op[ref].model_copy(update=change)
        return list(by_op.values())

    def next_op(self) -> str:
        ops = [int(e.op) for e in self.entries()]
        return f"{max(ops, default=0) + 1:04d}"

    def _append(self, line: IndexLine) -> None:
        with open(self.index, "a", encoding="utf-8") as f:
            f.write(line.model_dump_json(exclude_defaults=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def source(self, op: str, rel: str) -> Path:
        """The backup copy of `rel` for patch `op`, confined to the backups folder.

        Raises:
            ToolError: A malformed op id, or a backup that is missing, a link, or leads out.
        """
        if not OP_RE.match(op):
            raise BackupIndexCorrupt(f"backup id {op!r} is malformed")
        src = self.dir / op / rel
        if src.is_symlink() or not src.resolve().is_relative_to(self.dir.resolve()):
            raise ToolError(f"the backup of {rel} for patch {op} is a link out of .warpgrad/backups/; not used")
        if not src.is_file():
            raise ToolError(f"the backup of {rel} for patch {op} is missing ({src}); it cannot be restored. "
                            "Restore the file from version control")
        return src

    def verified(self, op: str, f: BackupFile) -> bytes:
        """The backup's bytes, only when their sha256 is the recorded `before`.

        Raises:
            ToolError: The backup is missing or its content is not what was recorded.
        """
        data = self.source(op, f.path).read_bytes()
        got = hashlib.sha256(data).hexdigest()
        if got != f.before:
            raise ToolError(f"the backup of {f.path} for patch {op} is corrupt: its sha256 is {got[:12]}…, the "
                            f"patch recorded {str(f.before)[:12]}…; it was not restored. Restore the file from "
                            "version control")
        return data

    def save_intent(self, op: str, files: list[BackupFile], tool_name: str) -> None:
        """Copy each existing file and write the `intent` line, before any file changes."""
        for f in files:
            if f.before is not None:
                dst = self.dir / op / f.path
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(self.workspace / f.path, dst)
                if sha256_file(dst) != f.before:
                    raise ToolError(f"{f.path} changed while it was being backed up; nothing was changed. Try again")
        self._append(IndexLine(op=op, tool=tool_name, files=files, intent=True))

    def confirm(self, op: str) -> None:
        self._append(IndexLine(confirmed=op))

    def abort(self, op: str) -> None:
        self._append(IndexLine(aborted=op))

    def mark_undone(self, op: str) -> None:
        self._append(IndexLine(undo_of=op))

    def keep_replaced(self, op: str, rel: str) -> None:
        """Before undo overwrites or removes `rel`, keep its current content in `backups/<op>-undone/`."""
        p = self.workspace / rel
        if p.is_file():
            dst = self.dir / f"{op}-undone" / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dst)


def _ledger_patches(workspace: Path, kind: str = "patch") -> dict[str, dict[str, Any]]:
    """Backup id -> payload of every `kind` record (patch or undo) in the verified ledger."""
    records, check = Ledger(workspace).read()
    if not check.ok:
        raise LedgerCorrupt("the evidence ledger failed verification (" + "; ".join(check.problems) + "); "
                            "a person must inspect .warpgrad/ledger.jsonl")
    return {str(r.payload.get("backup_op")): r.payload for r in records if r.kind == kind}


def _in_ledger(entry: BackupEntry, patches: dict[str, dict[str, Any]]) -> bool:
    rec = patches.get(entry.op)
    return rec is not None and rec.get("before") == {f.path: f.before for f in entry.files} \
        and rec.get("after") == {f.path: f.after for f in entry.files}


def _disk_sha(p: Path) -> str | None:
    return sha256_file(p) if p.is_file() else None


def recover(workspace: Path) -> list[str]:
    """Finish what a killed patch left (call under `edit_lock` and `state_lock`); returns what was done.

    Stale temp files go; a pending patch whose ledger record exists is confirmed; any other pending
    patch is rolled back from its verified backups (a file someone changed since is left alone) and
    marked aborted; an undo whose ledger record was written but not its index line is marked undone.
    """
    done = [f"removed the temp file {n} of a write that was killed" for n in clean_stale_temps(workspace)]
    b = Backups(workspace)
    entries = b.entries()
    pending = [e for e in entries if e.state == "pending"]
    if not pending and not any(e.state == "applied" and not e.undone for e in entries):
        return done
    patches = _ledger_patches(workspace)
    undos = _ledger_patches(workspace, "undo")
    for e in entries:
        if e.state == "applied" and not e.undone and e.op in undos and _in_ledger(e, patches):
            b.mark_undone(e.op)
            done.append(f"patch {e.op} was undone before its process died; marked undone")
    for e in pending:
        if _in_ledger(e, patches):
            b.confirm(e.op)
            done.append(f"patch {e.op} was applied and recorded before its process died; confirmed")
            continue
        for f in e.files:
            p = resolve_path(workspace, f.path)
            if _disk_sha(p) != f.after:
                continue  # not written yet (still `before`), or changed by someone since: left as it is
            if f.before is None:
                p.unlink()
            else:
                atomic_write(p, b.verified(e.op, f), b.source(e.op, f.path).stat().st_mode & 0o7777,
                             staging=tmp_dir(workspace))
        b.abort(e.op)
        done.append(f"patch {e.op} was interrupted before its ledger record; its files were rolled back")
    return done


# ---------------------------------------------------------------------------------------------------
# Patches
# ---------------------------------------------------------------------------------------------------


def apply_changes(
    workspace: Path, changes: dict[str, str], tool_name: str, diff: str, extra: dict[str, Any] | None = None,
    expected: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    """Back up, write and record a set of file changes as one patch (all or nothing), written ahead.

    Call it under `edit_lock` when the new texts were computed from the files' current content.

    Args:
        workspace: The workspace root.
        changes: Relative path -> new text (files must be resolved and checked by the caller).
        tool_name: The tool making the change.
        diff: The unified diff, recorded in the ledger.
        extra: More payload fields for the ledger record.
        expected: Relative path -> the sha256 the caller's edit was computed from (None: a new file);
            a file that no longer has it is refused.

    Returns:
        The ledger payload that was recorded (paths, before/after hashes, diff, backup op id, seq).
    """
    workspace = Path(workspace)
    require_intact_ledger(workspace)
    with state_lock(workspace):
        recover(workspace)
        backups = Backups(workspace)
        op = backups.next_op()
        files = []
        for rel, text in changes.items():
            p = workspace / rel
            before = sha256_file(p) if p.exists() else None
            if expected is not None and rel in expected and expected[rel] != before:
                raise ToolError(f"{rel} changed on disk after it was read; nothing was changed. Read it again")
            files.append(BackupFile(path=rel, before=before, after=hashlib.sha256(text.encode("utf-8")).hexdigest()))
        known = created_files(workspace)
        diagnostic = [f.path for f in files if f.path in known]  # warpgrad's own files, not the program
        backups.save_intent(op, files, tool_name)
        staging = tmp_dir(workspace)
        for rel, text in changes.items():
            p = workspace / rel
            mode = p.stat().st_mode & 0o7777 if p.exists() else None
            p.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(p, text.encode("utf-8"), mode, staging=staging)
        created = [f.path for f in files if f.before is None]
        if created:
            c = created_files(workspace)
            c.update({f.path: f.after for f in files if f.before is None})
            save_created(workspace, c)
        payload = {
            "paths": [f.path for f in files],
            "before": {f.path: f.before for f in files},
            "after": {f.path: f.after for f in files},
            "created": created,
            "diagnostic": diagnostic,
            "diff": diff,
            "backup_op": op,
            **(extra or {}),
        }
        rec = Ledger(workspace).append("patch", payload, tool=tool_name, files={f.path: f.after for f in files})
        backups.confirm(op)
    payload["seq"] = rec.seq
    return payload


class UndoResult(BaseModel):
    """What `undo` restored."""

    restored: list[str] = Field(default_factory=list, description="Files put back as they were before a patch.")
    removed: list[str] = Field(default_factory=list, description="Files a patch had created, removed again.")
    ops: list[str] = Field(default_factory=list, description="Backup operation ids undone, newest first.")
    recovered: list[str] = Field(default_factory=list, description="Interrupted patches finished or rolled back.")
    message: str = ""


def undo(workspace: Path, *, all_patches: bool = False, force: bool = False) -> UndoResult:
    """Restore the files of the last patch (or of every patch, newest first) from `.warpgrad/backups/`.

    A file that changed since the patch wrote it is not overwritten unless `force` is True: the change
    is someone's work. Only patches the evidence ledger also records are undone; every backup must have
    its recorded hash before any file is touched; whatever undo replaces is kept in
    `backups/<op>-undone/`. Each undone patch is recorded in the ledger (kind `undo`).

    Raises:
        ToolError: Nothing to undo, a file changed since the patch, a damaged index or backup, or a
            patch the ledger does not know.
    """
    workspace = Path(workspace).resolve()
    result = UndoResult()
    with edit_lock(workspace) as recovered, state_lock(workspace):
        result.recovered = recovered
        backups = Backups(workspace)
        todo = [e for e in reversed(backups.entries()) if e.state == "applied" and not e.undone]
        if not todo:
            raise ToolError("nothing to undo: no patch recorded in .warpgrad/backups/ that is not undone already")
        if not all_patches:
            todo = todo[:1]
        patches = _ledger_patches(workspace)
        for e in todo:
            if not _in_ledger(e, patches):
                raise ToolError(f"patch {e.op} of the backup index has no matching patch record in the evidence "
                                "ledger (was .warpgrad/ copied from elsewhere or edited?); it is not undone. "
                                f"Undone so far: {', '.join(result.ops) or 'nothing'}")
            targets = {f.path: resolve_path(workspace, f.path) for f in e.files}  # as strict as a tool argument
            changed = [f.path for f in e.files if _disk_sha(targets[f.path]) != f.after]
            if changed and not force:
                raise ToolError(f"{', '.join(changed)} changed after patch {e.op} wrote it; undo would lose "
                                f"that change. Restored so far: {', '.join(result.restored) or 'nothing'}. "
                                "Use --force to restore anyway")
            # Every backup is verified before the first file is touched: all of the patch or none of it.
            data = {f.path: backups.verified(e.op, f) for f in e.files if f.before is not None}
            for f in e.files:
                p = targets[f.path]
                backups.keep_replaced(e.op, f.path)
                if f.before is None:
                    if p.exists():
                        p.unlink()  # the patch created it; its last content is kept in <op>-undone/
                    result.removed.append(f.path)
                else:
                    mode = backups.source(e.op, f.path).stat().st_mode & 0o7777
                    atomic_write(p, data[f.path], mode, staging=tmp_dir(workspace))
                    result.restored.append(f.path)
            Ledger(workspace).append("undo", {
                "backup_op": e.op, "paths": [f.path for f in e.files],
                "after": {f.path: f.before for f in e.files},
            }, tool="undo", files={f.path: f.before for f in e.files if f.before})
            backups.mark_undone(e.op)
            result.ops.append(e.op)
    result.message = f"undid {len(result.ops)} patch(es)"
    return result


__all__ = ["STATE_DIR", "BackupIndexCorrupt", "Backups", "UndoResult", "apply_changes", "atomic_write",
           "created_files", "edit_lock", "mark_created", "recover", "require_intact_ledger", "state_lock", "undo"]
