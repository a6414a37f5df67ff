"""The evidence ledger (`.warpgrad/ledger.jsonl`): an append-only, hash-chained, signed log.

Every measuring tool appends one record per event: FD checks, tracker runs, patches, workflow runs.
Each record carries the hash of the one before it, and a head kept OUTSIDE the workspace, beside the key
(`binding.py`), remembers the last sequence number and hash written, so an edited record, a record removed
from the middle and records removed from the end are all detected even when `.warpgrad/` was rewritten.
Each record's signed body also names the workspace (a random id kept beside the key), so a ledger copied
in from another workspace is detected as such. Ledgers written before this binding (records without a
`workspace`) still read: their records are listed in `LedgerCheck.unbound` and, until the first bound
append, their end is checked only against `.warpgrad/ledger.head`, which a script can rewrite. A record is written with one `os.write` of one newline-terminated
line (O_APPEND) while holding an exclusive `fcntl` lock, so it lands completely or not at all and two
processes appending at once cannot interleave. A crash mid-write leaves at most a torn last line without
a newline: it is reported, the readable prefix stays usable, and the next append moves the fragment
aside to `.warpgrad/ledger.torn` before writing.

Signatures. The hash chain has no secret, so on its own anyone who can write the workspace can append a
record (or rewrite the file and recompute every hash). Each record is therefore also signed: `sig` is
HMAC-SHA256 of the record's hash under a key kept OUTSIDE the workspace, in the user's state directory
(`$WARPGRAD_KEY_DIR`, else `$XDG_STATE_HOME/warpgrad/`, else `~/.local/state/warpgrad/`; file
`ledger.key`, created 0600 in a 0700 folder on the first append). `verify()` reports which records lack a
valid signature under this machine's key, and the finish gate (`warpgrad.tools.gate`) refuses every
outcome while any record does.

Threat model (who can and cannot forge a record the gate accepts):
- CAN forge: anything that can read the key file, i.e. warpgrad itself, the user, and any process running
  as the user without a sandbox, including an agent's own shell in a host that gives it one (Claude
  Code's Bash tool). Signing does not stop such a process; only not giving it the key does.
- CANNOT forge: anything that can write the workspace but not read the user's state directory: the
  user's script when it runs inside warpgrad's sandbox (the sandbox hides the state directory), a model
  that only has warpgrad's own tools (they refuse every path outside the workspace), a collaborator or CI
  job that edits a committed or shared workspace, a container that mounts only the workspace. Their
  appends carry no signature or one under another key, and the gate rejects them. A ledger copied from
  another machine is unsigned here for the same reason; one copied from another workspace on this machine
  names that workspace, and one cut short disagrees with the head kept beside the key.
- Not covered: someone who can read the key can rewrite history; deleting the key makes every record
  unverifiable (the gate then refuses until a person starts a fresh ledger).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr
from pydantic_core import to_jsonable_python

from . import binding
from .keys import KEY_DIR_ENV, key_dir  # noqa: F401 - re-exported for callers
from .records import Event, FinishEvent, GradcheckEvent, InvalidEvent, read_event
from .registry import ToolError
from .state_files import STATE_DIR, StateDir, UnsafeStateFile

LEDGER_NAME = "ledger.jsonl"
HEAD_NAME = "ledger.head"
LOCK_NAME = "ledger.lock"
TORN_NAME = "ledger.torn"
GENESIS = "0" * 64
KEY_NAME = "ledger.key"
_UNSIGNED_FIELDS = {"hash", "sig", "key_id"}
_BOUND_FROM = "workspace"  # the field bound ledgers add; absent from the hashed body of older records  # not part of the hashed body: the signature is over the hash


def load_key(*, create: bool) -> bytes | None:
    """The user's ledger signing key (32 random bytes); made 0600 in a 0700 folder when `create` and absent.

    Returns None when there is no key and `create` is false (nothing can then be verified as signed).
    """
    path = key_dir() / KEY_NAME
    try:
        return _read_key(path)
    except FileNotFoundError:
        if not create:
            return None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return _read_key(path)
    try:
        os.write(fd, os.urandom(32).hex().encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    text = path.read_text(encoding="ascii").strip()
    if len(text) < 64:
        raise LedgerCorrupt(f"the ledger signing key {path} is truncated or empty; a person must restore or "
                            "remove it (removing it makes the existing records unverifiable)")
    return bytes.fromhex(text)


def key_id(key: bytes) -> str:
    """A short public fingerprint of a key (names the key in records and reports; reveals nothing of it)."""
    return hashlib.sha256(b"warpgrad-key-id:" + key).hexdigest()[:16]


def sign(key: bytes, record_hash: str) -> str:
    """HMAC-SHA256 of a record's hash: only a holder of the key can produce it."""
    return hmac.new(key, record_hash.encode("ascii"), hashlib.sha256).hexdigest()


class LedgerCorrupt(ToolError):
    """The ledger failed verification; nothing more is appended until a person looks at it."""


def state_dir(workspace: Path) -> Path:
    """The workspace's `.warpgrad/` directory (created on demand; refused when it is a link)."""
    StateDir.of_workspace(Path(workspace)).close()
    return Path(workspace) / STATE_DIR


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def disk_hashes(workspace: Path, paths: list[str] | set[str] | dict[str, str]) -> dict[str, str | None]:
    """sha256 of each workspace-relative path as it is on disk now (None when the file is gone)."""
    out: dict[str, str | None] = {}
    for rel in paths:
        p = Path(workspace) / rel
        out[rel] = sha256_file(p) if p.is_file() else None
    return out


def changed_files(workspace: Path, files: dict[str, str]) -> list[str]:
    """The paths in `files` whose content on disk no longer has the recorded hash."""
    now = disk_hashes(workspace, files)
    return [rel for rel, sha in files.items() if now[rel] != sha]


def _seqs(seqs: list[int]) -> str:
    return ", ".join(map(str, seqs[:10])) + (", ..." if len(seqs) > 10 else "")


def _check_head(records: list[LedgerRecord], head: tuple[int, str] | None, name: str, problems: list[str],
                notes: list[str]) -> None:
    """The ledger ends where `head` (seq, hash) says, or one record later (a crash before the head update)."""
    last = records[-1].seq if records else -1
    if head is None:
        if last > 0:
            problems.append(f"{name} is missing but the ledger has {last + 1} records")
        return
    hseq, hhash = head
    if not hhash:
        problems.append(f"{name} is unreadable (edited or corrupted)")
    elif hseq > last:
        problems.append(f"the ledger ends at record {last} but {name} says record {hseq} was written: "
                        "records were removed from the end (truncated)")
    elif hseq < 0 or records[hseq].hash != hhash:
        problems.append(f"record {hseq} does not match the hash in {name} (edited, or the ledger was replaced)")
    elif last - hseq == 1:
        notes.append("the last record was written but the head was not updated (a crash); benign")
    elif last - hseq > 1:
        problems.append(f"{name} is {last - hseq} records behind the ledger (records appended by something else?)")


def _unknown_to_json(obj: Any) -> Any:
    """What pydantic cannot serialise on its own: numpy scalars and arrays (without importing numpy here)
    become their values, anything else its text."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


def payload_json(payload: BaseModel | dict[str, Any]) -> str:
    """The canonical JSON of a payload: models by their fields (NaN and inf kept), paths as POSIX text,
    tuples and sets as lists, numpy values as numbers and lists."""
    return canonical_json(to_jsonable_python(payload, by_alias=False, fallback=_unknown_to_json))


def canonical_json(obj: Any) -> str:
    """The one serialisation that is hashed and written. NaN/inf stay NaN/inf (a NaN loss is evidence)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)


class LedgerRecord(BaseModel):
    """One event in the evidence ledger."""

    seq: int = Field(description="0-based position in the ledger.")
    time: str = Field(description="UTC time the record was written (ISO 8601).")
    kind: str = Field(description="gradcheck, tracker, run, patch, undo, file, shrink, diagnose, finish, ...")
    tool: str | None = Field(None, description="The tool or command that wrote the record.")
    payload: dict[str, Any] = Field(default_factory=dict, description="The tool's result.")
    files: dict[str, str] = Field(
        default_factory=dict, description="Workspace-relative path -> sha256 of the files the event exercised."
    )
    prev_hash: str = Field(description="`hash` of the previous record (64 zeros for the first).")
    workspace: str | None = Field(None, description="Id of the workspace the record was written in (kept beside "
                                  "the key); None on records written before ledgers were bound to a workspace.")
    hash: str = Field(description="sha256 of the canonical JSON of this record without `hash`, `sig`, `key_id`.")
    sig: str | None = Field(None, description="HMAC-SHA256 of `hash` under the user's key (None: unsigned).")
    key_id: str | None = Field(None, description="Fingerprint of the key that signed it.")
    _event: Event | InvalidEvent = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        # Validated as its kind once, when read (or made): an InvalidEvent stays in the ledger, proving nothing.
        self._event = read_event(self.kind, self.payload)

    @property
    def event(self) -> Event | InvalidEvent:
        """The record as its typed kind (`warpgrad.tools.records`); the stored payload is never rewritten."""
        return self._event

    def compute_hash(self) -> str:
        body = self.model_dump(exclude=_UNSIGNED_FIELDS)
        if body[_BOUND_FROM] is None:  # an older record: hashed exactly as it was written
            del body[_BOUND_FROM]
        return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


class LedgerCheck(BaseModel):
    """The result of verifying the ledger against its hash chain and its head file."""

    ok: bool = Field(description="True when the chain and the head agree and nothing was edited or removed.")
    records: int = Field(description="Records readable from the start of the file.")
    problems: list[str] = Field(default_factory=list, description="What is wrong, in words.")
    torn_tail_bytes: int = Field(0, description="Bytes of an incomplete last line left by a crash mid-write.")
    notes: list[str] = Field(default_factory=list, description="Benign findings (a torn tail, a lagging head).")
    signed: bool = Field(False, description="Every record carries a valid signature under this machine's key.")
    unsigned: list[int] = Field(default_factory=list,
                                description="Seqs of records without a valid signature under this machine's key.")
    key_id: str | None = Field(None, description="Fingerprint of this machine's key (None: no key exists).")
    workspace_id: str | None = Field(None, description="This workspace's id (None: no record was bound to it yet).")
    bound: bool = Field(False, description="Every record names this workspace and the ledger ends where the head "
                        "kept outside the workspace says: the history is this workspace's, whole.")
    unbound: list[int] = Field(default_factory=list, description="Seqs of records written before ledgers named "
                               "their workspace (older format): nothing ties them to this workspace.")


class _Scan(BaseModel):
    records: list[LedgerRecord]
    check: LedgerCheck
    good_bytes: int  # length of the prefix that holds `records`
    fragment_is_record: bool = False


class Ledger:
    """Append-only evidence ledger of one workspace.

    Args:
        workspace: The workspace root; the ledger lives in `<workspace>/.warpgrad/`, its head and the
            workspace's id beside the key (`binding.py`).
    """

    def __init__(self, workspace: Path) -> None:
        self.workspace = Path(workspace)
        self.dir = self.workspace / STATE_DIR
        self.path = self.dir / LEDGER_NAME
        self.head_path = self.dir / HEAD_NAME  # the in-workspace head of older ledgers (read, never trusted alone)

    def _state(self, *, create: bool) -> StateDir | None:
        if create:
            self.workspace.mkdir(parents=True, exist_ok=True)
        try:
            return StateDir.of_workspace(self.workspace, create=create)
        except FileNotFoundError:
            return None

    # -- reading -------------------------------------------------------------------------------------
    def _scan(self) -> _Scan:
        d = self._state(create=False)
        data = b""
        if d is not None:
            with d:
                data = d.read_bytes(LEDGER_NAME) or b""
                inside_head = self._read_head(d)
        else:
            inside_head = None
        records: list[LedgerRecord] = []
        problems: list[str] = []
        notes: list[str] = []
        pos = 0
        torn = 0
        fragment_is_record = False
        prev = GENESIS
        while pos < len(data):
            nl = data.find(b"\n", pos)
            line = data[pos:] if nl < 0 else data[pos:nl]
            end = len(data) if nl < 0 else nl + 1
            rec, why = self._parse(line, len(records), prev)
            if rec is None:
                if nl < 0:
                    torn = len(line)  # our writer puts the newline in the same write: this is a crash remnant
                    notes.append(f"the last line is incomplete ({torn} bytes, a write interrupted by a crash); "
                                 "the records before it are intact and it is moved aside on the next append")
                else:
                    problems.append(f"record {len(records)} (line {len(records) + 1}) {why}")
                break
            if nl < 0:
                fragment_is_record = True  # complete record that only lost its newline
            records.append(rec)
            prev = rec.hash
            pos = end
        good = pos if not torn else len(data) - torn
        wid, bound = self._check_binding(records, inside_head, problems, notes)
        key = load_key(create=False)
        unsigned = [r.seq for r in records if key is None or r.sig is None
                    or not hmac.compare_digest(r.sig, sign(key, r.hash))]
        check = LedgerCheck(ok=not problems, records=len(records), problems=problems, torn_tail_bytes=torn,
                            notes=notes, signed=bool(records) and not unsigned, unsigned=unsigned,
                            key_id=None if key is None else key_id(key), workspace_id=wid,
                            bound=bound and not problems,
                            unbound=[r.seq for r in records if r.workspace is None])
        return _Scan(records=records, check=check, good_bytes=good, fragment_is_record=fragment_is_record)

    @staticmethod
    def _parse(line: bytes, seq: int, prev: str) -> tuple[LedgerRecord | None, str]:
        try:
            rec = LedgerRecord.model_validate_json(line)
        except ValueError:
            return None, "is not a valid ledger record (edited or corrupted)"
        if rec.seq != seq:
            return None, f"has seq {rec.seq} where {seq} was expected (a record was removed or inserted)"
        if rec.prev_hash != prev:
            return None, "does not chain to the record before it (a record was removed, reordered or edited)"
        if rec.compute_hash() != rec.hash:
            return None, "was edited after it was written (its hash does not match its content)"
        return rec, ""

    def _check_binding(self, records: list[LedgerRecord], inside_head: tuple[int, str] | None,
                       problems: list[str], notes: list[str]) -> tuple[str | None, bool]:
        """Records name this workspace, and the ledger ends where the head outside the workspace says.

        Returns this workspace's id and whether the whole ledger is bound to it."""
        try:
            wid = binding.workspace_id(self.workspace, create=False)
        except ValueError:
            problems.append(f"this workspace's id beside the key ({binding.head_path(self.workspace).with_suffix('.id')}) "
                            "is damaged; a person must remove it (the ledger then reads as another workspace's)")
            return None, False
        foreign = [r.seq for r in records if r.workspace is not None and r.workspace != wid]
        if foreign:
            problems.append(
                f"record(s) {_seqs(foreign)} name another workspace ({records[foreign[0]].workspace}) than this one "
                f"({wid or 'none recorded yet'}): the ledger was copied in from elsewhere (or this folder was moved), "
                "so it is not this workspace's evidence. A person must start a fresh ledger (Ledger.start_fresh)")
        outside = binding.read_head(self.workspace)
        if isinstance(outside, binding.GarbledHead):
            problems.append(f"the ledger head kept outside the workspace ({outside.path}) is unreadable")
            return wid, False
        if outside is None:
            if any(r.workspace is not None for r in records):
                problems.append("the ledger has records bound to a workspace but there is no head for this one at "
                                f"{binding.head_path(self.workspace)}: the ledger was copied in from elsewhere, or "
                                "the head was removed")
                return wid, False
            _check_head(records, inside_head, HEAD_NAME, problems, notes)
            if records:
                notes.append(f"record(s) {_seqs([r.seq for r in records])} were written before ledgers named their "
                             f"workspace (older format): unbound; their end is checked only against {HEAD_NAME}, "
                             "which anything that writes the workspace can rewrite")
            return wid, False
        if outside.workspace != wid:
            problems.append(f"the ledger head outside the workspace names workspace {outside.workspace}, not {wid}")
            return wid, False
        _check_head(records, (outside.seq, outside.hash), f"the head kept outside the workspace "
                    f"({binding.head_path(self.workspace)})", problems, notes)
        return wid, not foreign and all(r.workspace == wid for r in records)

    @staticmethod
    def _read_head(d: StateDir) -> tuple[int, str] | None:
        try:
            raw = d.read_bytes(HEAD_NAME)
        except UnsafeStateFile:
            return (-1, "")
        if raw is None:
            return None
        try:
            h = json.loads(raw.decode("utf-8"))
            return int(h["seq"]), str(h["hash"])
        except (ValueError, KeyError, TypeError):
            return (-1, "")  # an unreadable head is a problem, never ignored

    def records(self) -> list[LedgerRecord]:
        """Every readable record, in order (the intact prefix when the file is damaged)."""
        return self._scan().records

    def verify(self) -> LedgerCheck:
        """Check the hash chain, the workspace every record names, and the head kept outside the workspace."""
        return self._scan().check

    def read(self) -> tuple[list[LedgerRecord], LedgerCheck]:
        """Records and the verification result from one read of the file."""
        s = self._scan()
        return s.records, s.check

    # -- writing -------------------------------------------------------------------------------------
    def append(
        self, kind: str, payload: BaseModel | dict[str, Any], *, tool: str | None = None,
        files: dict[str, str] | None = None,
    ) -> LedgerRecord:
        """Append one record and return it.

        Args:
            kind: Event kind (`gradcheck`, `tracker`, `run`, `patch`, `finish`, ...).
            payload: The tool's result; a pydantic model is dumped (NaN and inf are kept).
            tool: The tool or command writing it (defaults to `kind`).
            files: Path -> sha256 of the workspace files the event exercised; defaults to the payload's
                `files` field when that is a mapping.

        Raises:
            LedgerCorrupt: The ledger failed verification; appending would bury the damage.
            UnsafeStateFile: A state file is a planted link; nothing was written.
        """
        body = json.loads(payload_json(payload))  # exactly what a reader will see
        if not isinstance(body, dict):
            raise TypeError("a ledger payload must be a mapping or a pydantic model")
        if files is None:
            pf = body.get("files")
            files = {str(k): str(v) for k, v in pf.items()} if isinstance(pf, dict) else {}
        key = load_key(create=True)
        if key is None:  # load_key(create=True) always returns a key; this keeps the type honest
            raise LedgerCorrupt(f"no ledger signing key could be made in {key_dir()}")
        wid = binding.workspace_id(self.workspace, create=True)
        d = self._state(create=True)
        assert d is not None  # made just now
        with d, d.lock(LOCK_NAME):
            scan = self._scan()
            if not scan.check.ok:
                raise LedgerCorrupt(
                    "the evidence ledger failed verification: " + "; ".join(scan.check.problems)
                    + f". Nothing was recorded. A person must inspect {self.path}; to start over, call "
                    "Ledger.start_fresh() (it moves the ledger aside and forgets its head outside the workspace)."
                )
            prefix = b""
            if scan.check.torn_tail_bytes:
                self._set_aside_fragment(d, scan.good_bytes)
            elif scan.fragment_is_record:
                prefix = b"\n"
            rec = LedgerRecord(
                seq=len(scan.records), time=_dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds"),
                kind=kind, tool=tool or kind, payload=body, files=files,
                prev_hash=scan.records[-1].hash if scan.records else GENESIS, workspace=wid, hash="",
            )
            rec.hash = rec.compute_hash()
            rec.sig, rec.key_id = sign(key, rec.hash), key_id(key)
            line = prefix + canonical_json(rec.model_dump()).encode("utf-8") + b"\n"
            n = d.append(LEDGER_NAME, line)
            if n != len(line):  # never seen on a local file system; a short write is left as a torn tail
                raise OSError(f"short write to the ledger ({n} of {len(line)} bytes)")
            binding.write_head(self.workspace, binding.OutsideHead(workspace=str(wid), seq=rec.seq, hash=rec.hash))
        return rec

    def preflight(self) -> None:
        """Open (without writing) every state file an append writes, so a planted link is refused before a
        caller changes anything it means to record.

        Raises:
            UnsafeStateFile: The state folder, the lock, the ledger or `ledger.torn` is a link or shared.
        """
        d = self._state(create=True)
        assert d is not None
        with d, d.lock(LOCK_NAME):
            for name in (LEDGER_NAME, TORN_NAME):
                if d.exists(name):
                    os.close(d.open(name, os.O_WRONLY | os.O_APPEND, single_link=True))

    @staticmethod
    def _set_aside_fragment(d: StateDir, good_bytes: int) -> None:
        data = d.read_bytes(LEDGER_NAME) or b""
        d.append(TORN_NAME, data[good_bytes:] + b"\n")
        d.truncate(LEDGER_NAME, good_bytes)

    def start_fresh(self) -> Path | None:
        """A person's way to start over: move the ledger aside (returned) and forget its head outside the
        workspace, so the next append begins a new history. Never called by a tool or a script's run."""
        d = self._state(create=True)
        assert d is not None
        with d, d.lock(LOCK_NAME):
            moved = None
            if d.exists(LEDGER_NAME):
                stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S%f")
                moved = self.dir / f"{LEDGER_NAME}.{stamp}.old"
                os.replace(LEDGER_NAME, moved.name, src_dir_fd=d.fd, dst_dir_fd=d.fd)
            with contextlib.suppress(FileNotFoundError):
                d.unlink(HEAD_NAME)
            binding.forget_head(self.workspace)
        return moved

    # -- summaries -----------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """A short view of the ledger for `workspace_overview`: counts per kind, last check, last finish."""
        records, check = self.read()
        kinds: dict[str, int] = {}
        for r in records:
            kinds[r.kind] = kinds.get(r.kind, 0) + 1
        last_finish = next((e for r in reversed(records) if isinstance(e := r.event, FinishEvent)), None)
        return {
            "records": len(records),
            "verified": check.ok,
            "problems": check.problems,
            "kinds": kinds,
            "last_gradcheck": self._last_check(records),
            "finished": None if last_finish is None else last_finish.payload.outcome,
        }

    def _last_check(self, records: list[LedgerRecord]) -> dict[str, Any] | None:
        for r in reversed(records):
            if isinstance(e := r.event, GradcheckEvent):
                return {"seq": r.seq, "passed": e.payload.passed, "signature": e.payload.signature,
                        "max_rel_error": e.payload.max_rel_error,
                        "stale_files": changed_files(self.workspace, r.files)}
        return None
