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
import hmac
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from .binding import workspace_id
from .ledger import STATE_DIR, Ledger, LedgerCorrupt, canonical_json, load_key, sha256_file, sign
from .paths import resolve_path
from .registry import ToolError
from .state_files import StateDir, UnsafeStateFile

OP_RE = re.compile(r"^\d{4,9}$")
TMP_SUFFIX = ".wgtmp"
INDEX_NAME = "index.jsonl"


class BackupIndexCorrupt(ToolError):
    """`.warpgrad/backups/index.jsonl` cannot be read; nothing is restored from it."""


# ---------------------------------------------------------------------------------------------------
# State dir, locks, atomic writes
# ---------------------------------------------------------------------------------------------------


def checked_state_dir(workspace: Path) -> StateDir:
    """`.warpgrad/` of the workspace, opened and refused when it is a link (a crafted state dir could lead out)."""
    return StateDir.of_workspace(Path(workspace))


@contextlib.contextmanager
def edit_lock(workspace: Path) -> Iterator[list[str]]:
    """Held from reading a file to recording its change: two edits at once cannot lose one.

    On entry it finishes what a killed edit left (`recover`), before the caller reads any file, and
    yields what it did.
    """
    with checked_state_dir(workspace) as d, d.lock("edit.lock"):
        with state_lock(workspace):
            done = recover(workspace)
        yield done


@contextlib.contextmanager
def state_lock(workspace: Path) -> Iterator[None]:
    """Guards created.json and the backup index (taken inside `edit_lock`, never around it)."""
    with checked_state_dir(workspace) as d, d.lock("state.lock"):
        yield


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


def tmp_dir(workspace: Path) -> StateDir:
    """`.warpgrad/tmp/`: where atomic writes stage their data, so a killed write leaves nothing in the tree."""
    with checked_state_dir(workspace) as d:
        return d.sub("tmp")


def atomic_write(path: Path, data: bytes, mode: int | None = None, *, staging: StateDir | None = None) -> None:
    """Write `data` to `path` through a temporary file and a rename, so readers never see half a file.

    The temporary file is made with `O_EXCL | O_NOFOLLOW` under an unpredictable name, relative to its
    opened folder; the rename replaces a link at `path`, never follows it.

    Args:
        path: The target (resolved and checked by the caller).
        data: Its new content.
        mode: Permission bits (default: those of a file `open()` would create).
        staging: Folder for the temporary file (`tmp_dir(workspace)`); the target's folder when None
            or on another file system (a rename cannot cross one).
    """
    with StateDir(os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), path.parent) as target:
        where = target
        if staging is not None and os.fstat(staging.fd).st_dev == os.fstat(target.fd).st_dev:
            where = staging
        tmp, fd = where.new_temp(path.name[:100] + TMP_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
                os.fchmod(f.fileno(), default_mode() if mode is None else mode)
            os.replace(tmp, path.name, src_dir_fd=where.fd, dst_dir_fd=target.fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=where.fd)
            raise


def clean_stale_temps(workspace: Path) -> list[str]:
    """Remove staged temp files whose writer process is gone (killed mid-write); returns their names."""
    removed = []
    with tmp_dir(workspace) as d:
        for name in d.names():
            pid = name.split("-", 1)[0]
            if not (name.endswith(TMP_SUFFIX) and pid.isdigit()):
                continue
            try:
                os.kill(int(pid), 0)
                continue  # its writer still runs
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
            with contextlib.suppress(FileNotFoundError):
                d.unlink(name)
                removed.append(name)
    return removed


# ---------------------------------------------------------------------------------------------------
# Files warpgrad created
# ---------------------------------------------------------------------------------------------------


CREATED_NAME = "created.json"


def created_files(workspace: Path) -> dict[str, str]:
    """Files warpgrad created in the workspace: relative path -> sha256 when warpgrad last wrote it.

    Raises:
        ToolError: `.warpgrad/created.json` is not a JSON object of path -> hash.
    """
    p = Path(workspace) / STATE_DIR / CREATED_NAME
    with checked_state_dir(workspace) as d:
        raw = d.read_bytes(CREATED_NAME)
    if raw is None:
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ToolError(f"{p} is not valid JSON ({e}); move it aside to continue") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise ToolError(f"{p} is not a mapping of path -> sha256; move it aside to continue")
    return data


def save_created(workspace: Path, created: dict[str, str]) -> None:
    with checked_state_dir(workspace) as d:
        d.write_atomic(CREATED_NAME, json.dumps(created, indent=1, sort_keys=True).encode("utf-8"), default_mode())


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
    Ledger(workspace).preflight()
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
    workspace: str | None = Field(None, description="The intent's workspace id (`binding.py`), signed with it.")
    sig: str | None = Field(None, description="HMAC of the intent under the ledger key: only warpgrad can write one.")

    def intent_hash(self) -> str:
        """What an intent's signature covers: the op, its files' before/after, the tool and the workspace."""
        body = self.model_dump(include={"op", "tool", "files", "workspace"})
        return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


class BackupEntry(BaseModel):
    """A patch as the index tells it, events folded in."""

    op: str
    tool: str | None
    files: list[BackupFile]
    state: str = Field(description="pending (intent only), applied, aborted.")
    undone: bool = False
    signed: bool = Field(False, description="The intent carries a valid signature for this workspace under this "
                         "machine's key (written by warpgrad, not planted).")


class Backups:
    """`.warpgrad/backups/`: a copy of every file before a patch, plus the index `undo` reads.

    Every folder and file below it is opened relative to its checked parent without following links
    (`state_files.StateDir`): a planted `backups/<op>/` link makes warpgrad refuse, never write through it.
    """

    def __init__(self, workspace: Path) -> None:
        self.workspace = Path(workspace).resolve()
        self.dir = self.workspace / STATE_DIR / "backups"
        with checked_state_dir(self.workspace) as d:
            self.sd = d.sub("backups")
        self.index = self.dir / INDEX_NAME

    def entries(self) -> list[BackupEntry]:
        """Every patch in the index, in order.

        Raises:
            BackupIndexCorrupt: A line is not JSON or not an index line; the message names it.
        """
        try:
            raw = self.sd.read_bytes(INDEX_NAME)
        except UnsafeStateFile as e:
            raise BackupIndexCorrupt(f"{e}; nothing is restored from it") from None
        if raw is None:
            return []
        by_op: dict[str, BackupEntry] = {}
        key, wid = load_key(create=False), workspace_id(self.workspace, create=False)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BackupIndexCorrupt(f"{self.index} is not UTF-8 text ({e}); nothing is restored from it") from None
        for n, line_text in enumerate(text.splitlines(), 1):
            if not line_text.strip():
                continue
            try:
                line = IndexLine.model_validate_json(line_text)
            except ValidationError as e:
                first = e.errors()[0]
                where = ".".join(str(x) for x in first["loc"]) or "the line"
                raise BackupIndexCorrupt(
                    f"line {n} of {self.index} is damaged ({where}: {first['msg']}); undo reads nothing from a "
                    "damaged index. Restore the files from version control, or move .warpgrad/backups aside"
                ) from None
            if line.op is not None:
                state = "pending" if line.intent else "applied"
                signed = (key is not None and line.sig is not None and line.workspace == wid
                          and hmac.compare_digest(line.sig, sign(key, line.intent_hash())))
                by_op[line.op] = BackupEntry(op=line.op, tool=line.tool, files=line.files, state=state,
                                             signed=line.intent and signed)
            for ref, change in ((line.confirmed, {"state": "applied"}), (line.aborted, {"state": "aborted"}),
                                (line.undo_of, {"undone": True})):
                if ref is not None and ref in by_op:
                    by_op[ref] = by_op[ref].model_copy(update=change)
        return list(by_op.values())

    def next_op(self, signed_ops: set[str]) -> str:
        """A backup id neither the index nor the signed ledger has used (the index alone can be rewritten)."""
        ops = [int(e.op) for e in self.entries()] + [int(o) for o in signed_ops if OP_RE.match(o)]
        return f"{max(ops, default=0) + 1:04d}"

    def _append(self, line: IndexLine) -> None:
        self.sd.append(INDEX_NAME, (line.model_dump_json(exclude_defaults=True) + "\n").encode("utf-8"))

    def _folder(self, op: str, rel: str, *, create: bool) -> tuple[StateDir, str]:
        """The opened folder holding `<op>/<rel>` and the file's name in it (each step refuses links)."""
        if not re.match(r"^\d{4,9}(-undone|-rolledback)?$", op):
            raise BackupIndexCorrupt(f"backup id {op!r} is malformed")
        *dirs, name = rel.split("/")
        try:
            return self.sd.sub("/".join([op, *dirs]), create=create), name
        except FileNotFoundError:
            raise ToolError(f"the backup of {rel} for patch {op} is missing ({self.dir / op / rel}); it cannot be "
                            "restored. Restore the file from version control") from None

    def _read(self, op: str, rel: str) -> tuple[bytes, int]:
        folder, name = self._folder(op, rel, create=False)
        with folder:
            try:
                fd = folder.open(name, os.O_RDONLY)
            except FileNotFoundError:
                raise ToolError(f"the backup of {rel} for patch {op} is missing ({self.dir / op / rel}); it cannot "
                                "be restored. Restore the file from version control") from None
        with os.fdopen(fd, "rb") as f:
            return f.read(), os.fstat(f.fileno()).st_mode & 0o7777

    def verified(self, op: str, f: BackupFile) -> tuple[bytes, int]:
        """The backup's bytes and mode, only when their sha256 is the recorded `before`.

        Raises:
            ToolError: The backup is missing, a link, or its content is not what was recorded.
        """
        data, mode = self._read(op, f.path)
        got = hashlib.sha256(data).hexdigest()
        if got != f.before:
            raise ToolError(f"the backup of {f.path} for patch {op} is corrupt: its sha256 is {got[:12]}…, the "
                            f"patch recorded {str(f.before)[:12]}…; it was not restored. Restore the file from "
                            "version control")
        return data, mode

    def _copy_in(self, op: str, rel: str) -> str | None:
        """Copy workspace file `rel` to `backups/<op>/<rel>`; returns the copy's sha256 (None: no such file)."""
        p = self.workspace / rel
        if not p.is_file():
            return None
        data = p.read_bytes()
        folder, name = self._folder(op, rel, create=True)
        with folder:
            folder.write_atomic(name, data, p.stat().st_mode & 0o7777)
        return hashlib.sha256(data).hexdigest()

    def save_intent(self, op: str, files: list[BackupFile], tool_name: str) -> None:
        """Copy each existing file and write the `intent` line, before any file changes."""
        for f in files:
            if f.before is not None and self._copy_in(op, f.path) != f.before:
                raise ToolError(f"{f.path} changed while it was being backed up; nothing was changed. Try again")
        line = IndexLine(op=op, tool=tool_name, files=files, intent=True,
                         workspace=workspace_id(self.workspace, create=True))
        key = load_key(create=True)
        assert key is not None  # create=True always makes one
        line.sig = sign(key, line.intent_hash())
        self._append(line)

    def confirm(self, op: str) -> None:
        self._append(IndexLine(confirmed=op))

    def abort(self, op: str) -> None:
        self._append(IndexLine(aborted=op))

    def mark_undone(self, op: str) -> None:
        self._append(IndexLine(undo_of=op))

    def keep_replaced(self, op: str, rel: str, why: str = "undone") -> str | None:
        """Before undo or recovery overwrites or removes `rel`, keep its current content in
        `backups/<op>-<why>/`; returns where (workspace-relative), None when there was no file."""
        where = f"{op}-{why}"
        return f"{STATE_DIR}/backups/{where}/{rel}" if self._copy_in(where, rel) is not None else None


def _signed_by_kind(workspace: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Kind -> backup id -> payload of every SIGNED record naming a backup (patch, patch_abort, undo) in the
    verified ledger: an unsigned record (anything that can write the workspace can append one) proves nothing."""
    records, check = Ledger(workspace).read()
    if not check.ok:
        raise LedgerCorrupt("the evidence ledger failed verification (" + "; ".join(check.problems) + "); "
                            "a person must inspect .warpgrad/ledger.jsonl")
    bad = set(check.unsigned)
    out: dict[str, dict[str, dict[str, Any]]] = {"patch": {}, "patch_abort": {}, "undo": {}}
    for r in records:
        if r.kind in out and r.seq not in bad:
            out[r.kind][str(r.payload.get("backup_op"))] = r.payload
    return out


def _ledger_patches(workspace: Path, kind: str = "patch") -> dict[str, dict[str, Any]]:
    return _signed_by_kind(workspace)[kind]


def _in_ledger(entry: BackupEntry, patches: dict[str, dict[str, Any]]) -> bool:
    rec = patches.get(entry.op)
    return rec is not None and rec.get("before") == {f.path: f.before for f in entry.files} \
        and rec.get("after") == {f.path: f.after for f in entry.files}


def _disk_sha(p: Path) -> str | None:
    return sha256_file(p) if p.is_file() else None


def recover(workspace: Path) -> list[str]:
    """Finish what a killed patch left (call under `edit_lock` and `state_lock`); returns what was done.

    The backup index can be rewritten by anything that writes the workspace, so only an intent warpgrad
    signed (under the ledger key, naming this workspace) is acted on. A pending intent whose signed patch
    record is in the ledger is confirmed. A signed pending intent without one (nor a signed `patch_abort`)
    was killed mid-write: its files that hold the intent's `after` are rolled back to backups whose sha256
    is the intent's signed `before`, a copy of what is replaced is kept in `backups/<op>-rolledback/`, and
    the rollback is recorded in the ledger (`patch_abort`). A pending line that is not signed (planted)
    is marked aborted and restores nothing.
    """
    done = [f"removed the temp file {n} of a write that was killed" for n in clean_stale_temps(workspace)]
    b = Backups(workspace)
    entries = b.entries()
    if not any(e.state == "pending" or (e.state == "applied" and not e.undone) for e in entries):
        return done
    signed = _signed_by_kind(workspace)
    patches, aborts, undos = signed["patch"], signed["patch_abort"], signed["undo"]
    for e in entries:
        if e.state == "applied" and not e.undone and e.op in undos and _in_ledger(e, patches):
            b.mark_undone(e.op)
            done.append(f"patch {e.op} was undone before its process died; marked undone")
        elif e.state != "pending":
            continue
        elif _in_ledger(e, patches):
            b.confirm(e.op)
            done.append(f"patch {e.op} was applied and recorded before its process died; confirmed")
        elif not e.signed or e.op in aborts or e.op in patches:
            b.abort(e.op)
            done.append(f"patch {e.op} is pending in the backup index but its intent is not one warpgrad signed for "
                        "this workspace (planted or replayed); nothing was restored from it")
        else:
            done.append(_roll_back(workspace, b, e.op, e.files))
    return done


def _roll_back(workspace: Path, b: Backups, op: str, files: list[BackupFile]) -> str:
    """Put the files of a signed intent killed mid-write back to its signed `before`, keeping what it replaces,
    and record the rollback in the ledger (so a replayed copy of the intent is never acted on again)."""
    restored, kept, left = [], [], []
    for f in files:
        p = resolve_path(workspace, f.path)
        if _disk_sha(p) != f.after:
            left.append(f.path)  # not written yet (still `before`), or changed by someone since: left as it is
            continue
        if (copy := b.keep_replaced(op, f.path, "rolledback")) is not None:
            kept.append(copy)
        if f.before is None:
            p.unlink()
        else:
            data, mode = b.verified(op, f)
            atomic_write(p, data, mode, staging=tmp_dir(workspace))
        restored.append(f.path)
    Ledger(workspace).append("patch_abort", {"backup_op": op, "restored": restored, "left": left, "kept": kept},
                             tool="recover")
    b.abort(op)
    return (f"patch {op} was interrupted before its ledger record; rolled back to its signed before-state: "
            f"{', '.join(restored) or 'no file had changed'}" + (f" (what was replaced is kept in {', '.join(kept)})"
                                                                  if kept else ""))


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
        signed = _signed_by_kind(workspace)
        op = backups.next_op(set(signed["patch"]) | set(signed["patch_abort"]))
        files = []
        for rel, text in changes.items():
            p = workspace / rel
            before = sha256_file(p) if p.exists() else None
            if expected is not None and rel in expected and expected[rel] != before:
                raise ToolError(f"{rel} changed on disk after it was read; nothing was changed. Read it again")
            files.append(BackupFile(path=rel, before=before, after=hashlib.sha256(text.encode("utf-8")).hexdigest()))
        known = created_files(workspace)
        diagnostic = [f.path for f in files if f.path in known]  # warpgrad's own files, not the program
        backups.save_intent(op, files, tool_name)  # signed, before any file changes: recovery acts on nothing else
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
                backups.keep_replaced(e.op, f.path, "undone")
                if f.before is None:
                    if p.exists():
                        p.unlink()  # the patch created it; its last content is kept in <op>-undone/
                    result.removed.append(f.path)
                else:
                    atomic_write(p, data[f.path][0], data[f.path][1], staging=tmp_dir(workspace))
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
