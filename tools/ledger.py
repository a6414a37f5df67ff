"""The evidence ledger (`.warpgrad/ledger.jsonl`) and the finish gate.

Every measuring tool appends one record per event: FD checks, tracker runs, patches, workflow runs.
Each record carries the hash of the one before it, and `.warpgrad/ledger.head` remembers the last
sequence number and hash written, so an edited record, a record removed from the middle and records
removed from the end are all detected. A record is written with one `os.write` of one newline-terminated
line (O_APPEND) while holding an exclusive `fcntl` lock, so it lands completely or not at all and two
processes appending at once cannot interleave. A crash mid-write leaves at most a torn last line without
a newline: it is reported, the readable prefix stays usable, and the next append moves the fragment
aside to `.warpgrad/ledger.torn` before writing.

What the hash chain does not do: someone who rewrites the ledger *and* recomputes every hash and the
head is not detected (there is no secret). The chain catches accidents, crashes and casual edits.

`check_finish(workspace, outcome)` is the one gate every front end calls (the `finish` tool, `warpgrad
gate`, hooks): it reads the ledger and the files on disk and says what evidence is missing.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field
from warpgrad.tools.registry import ToolError

STATE_DIR = ".warpgrad"
LEDGER_NAME = "ledger.jsonl"
HEAD_NAME = "ledger.head"
LOCK_NAME = "ledger.lock"
TORN_NAME = "ledger.torn"
GENESIS = "0" * 64

Outcome = Literal["fixed", "gradients_correct", "not_a_gradient_bug", "blocked", "diagnosis_only"]
OUTCOMES: tuple[str, ...] = ("fixed", "gradients_correct", "not_a_gradient_bug", "blocked", "diagnosis_only")


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock held for the block: writers in other processes wait their turn."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


class LedgerCorrupt(ToolError):
    """The ledger failed verification; nothing more is appended until a person looks at it."""


def state_dir(workspace: Path) -> Path:
    """The workspace's `.warpgrad/` directory (created on demand)."""
    d = Path(workspace) / STATE_DIR
    d.mkdir(parents=True, exist_ok=True)
    return d


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


def _jsonable(obj: Any) -> Any:
    """Plain JSON types from pydantic models, paths, numpy scalars and arrays, tuples and sets."""
    if isinstance(obj, BaseModel):
        return _jsonable(obj.model_dump())
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if isinstance(obj, Path):
        return obj.as_posix()
    if hasattr(obj, "tolist"):  # numpy scalars and arrays, without importing numpy here
        return _jsonable(obj.tolist())
    return str(obj)


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
    hash: str = Field(description="sha256 of the canonical JSON of this record without `hash`.")

    def compute_hash(self) -> str:
        body = self.model_dump(exclude={"hash"})
        return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


class LedgerCheck(BaseModel):
    """The result of verifying the ledger against its hash chain and its head file."""

    ok: bool = Field(description="True when the chain and the head agree and nothing was edited or removed.")
    records: int = Field(description="Records readable from the start of the file.")
    problems: list[str] = Field(default_factory=list, description="What is wrong, in words.")
    torn_tail_bytes: int = Field(0, description="Bytes of an incomplete last line left by a crash mid-write.")
    notes: list[str] = Field(default_factory=list, description="Benign findings (a torn tail, a lagging head).")


class _Scan(BaseModel):
    records: list[LedgerRecord]
    check: LedgerCheck
    good_bytes: int  # length of the prefix that holds `records`
    fragment_is_record: bool = False


class Ledger:
    """Append-only evidence ledger of one workspace.

    Args:
        workspace: The workspace root; the ledger lives in `<workspace>/.warpgrad/`.
    """

    def __init__(self, workspace: Path) -> None:
        self.workspace = Path(workspace)
        self.dir = self.workspace / STATE_DIR
        self.path = self.dir / LEDGER_NAME
        self.head_path = self.dir / HEAD_NAME

    # -- reading -------------------------------------------------------------------------------------
    def _scan(self) -> _Scan:
        data = self.path.read_bytes() if self.path.exists() else b""
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
        self._check_head(records, problems, notes)
        check = LedgerCheck(ok=not problems, records=len(records), problems=problems, torn_tail_bytes=torn,
                            notes=notes)
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

    def _check_head(self, records: list[LedgerRecord], problems: list[str], notes: list[str]) -> None:
        head = self._read_head()
        last = records[-1].seq if records else -1
        if head is None:
            if last > 0:
                problems.append(f"{HEAD_NAME} is missing but the ledger has {last + 1} records")
            return
        hseq, hhash = head
        if not hhash:
            problems.append(f"{HEAD_NAME} is unreadable (edited or corrupted)")
        elif hseq > last:
            problems.append(
                f"the ledger ends at record {last} but {HEAD_NAME} says record {hseq} was written: "
                "records were removed from the end (truncated)"
            )
        elif records and records[hseq].hash != hhash:
            problems.append(f"record {hseq} does not match the hash in {HEAD_NAME} (edited)")
        elif last - hseq == 1:
            notes.append("the last record was written but the head was not updated (a crash); benign")
        elif last - hseq > 1:
            problems.append(f"{HEAD_NAME} is {last - hseq} records behind the ledger (head replaced?)")

    def _read_head(self) -> tuple[int, str] | None:
        try:
            d = json.loads(self.head_path.read_text(encoding="utf-8"))
            return int(d["seq"]), str(d["hash"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            return (-1, "")  # an unreadable head is a problem, never ignored

    def records(self) -> list[LedgerRecord]:
        """Every readable record, in order (the intact prefix when the file is damaged)."""
        return self._scan().records

    def verify(self) -> LedgerCheck:
        """Check the hash chain and the head file."""
        return self._scan().check

    def read(self) -> tuple[list[LedgerRecord], LedgerCheck]:
        """Records and the verification result from one read of the file."""
        s = self._scan()
        return s.records, s.check

    # -- writing -------------------------------------------------------------------------------------
    def _locked(self) -> contextlib.AbstractContextManager[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        return file_lock(self.dir / LOCK_NAME)

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
        """
        body = json.loads(canonical_json(_jsonable(payload)))  # exactly what a reader will see
        if not isinstance(body, dict):
            raise TypeError("a ledger payload must be a mapping or a pydantic model")
        if files is None:
            pf = body.get("files")
            files = {str(k): str(v) for k, v in pf.items()} if isinstance(pf, dict) else {}
        with self._locked():
            scan = self._scan()
            if not scan.check.ok:
                raise LedgerCorrupt(
                    "the evidence ledger failed verification: " + "; ".join(scan.check.problems)
                    + f". Nothing was recorded. A person must inspect {self.path}; to start over, move "
                    f"{STATE_DIR}/{LEDGER_NAME} and {STATE_DIR}/{HEAD_NAME} aside."
                )
            prefix = b""
            if scan.check.torn_tail_bytes:
                self._set_aside_fragment(scan.good_bytes)
            elif scan.fragment_is_record:
                prefix = b"\n"
            prev = scan.records[-1].hash if scan.records else GENESIS
            rec = LedgerRecord(
                seq=len(scan.records), time=_dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds"),
                kind=kind, tool=tool or kind, payload=body, files=files, prev_hash=prev, hash="",
            )
            rec.hash = rec.compute_hash()
            line = prefix + canonical_json(rec.model_dump()).encode("utf-8") + b"\n"
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                n = os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
            if n != len(line):  # never seen on a local file system; a short write is left as a torn tail
                raise OSError(f"short write to the ledger ({n} of {len(line)} bytes)")
            self._write_head(rec)
        return rec

    def _set_aside_fragment(self, good_bytes: int) -> None:
        with open(self.path, "rb") as f:
            f.seek(good_bytes)
            fragment = f.read()
        with open(self.dir / TORN_NAME, "ab") as f:
            f.write(fragment + b"\n")
        os.truncate(self.path, good_bytes)

    def _write_head(self, rec: LedgerRecord) -> None:
        tmp = self.head_path.with_name(f"{HEAD_NAME}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"seq": rec.seq, "hash": rec.hash}), encoding="utf-8")
        os.replace(tmp, self.head_path)

    # -- summaries -----------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """A short view of the ledger for `workspace_overview`: counts per kind, last check, last finish."""
        records, check = self.read()
        kinds: dict[str, int] = {}
        for r in records:
            kinds[r.kind] = kinds.get(r.kind, 0) + 1
        last_check = next((r for r in reversed(records) if r.kind == "gradcheck"), None)
        last_finish = next((r for r in reversed(records) if r.kind == "finish"), None)
        return {
            "records": len(records),
            "verified": check.ok,
            "problems": check.problems,
            "kinds": kinds,
            "last_gradcheck": None if last_check is None else {
                "seq": last_check.seq, "passed": last_check.payload.get("passed"),
                "signature": last_check.payload.get("signature"),
                "max_rel_error": last_check.payload.get("max_rel_error"),
                "stale_files": changed_files(self.workspace, last_check.files),
            },
            "finished": None if last_finish is None else last_finish.payload.get("outcome"),
        }


# ---------------------------------------------------------------------------------------------------
# The finish gate
# ---------------------------------------------------------------------------------------------------


class GateResult(BaseModel):
    """Whether the ledger holds the evidence an outcome needs, and what is missing if not."""

    outcome: str = Field(description="The outcome that was asked for.")
    accepted: bool = Field(description="True when every piece of evidence the outcome needs is on record.")
    missing: list[str] = Field(default_factory=list, description="What is missing, each an action to take.")
    evidence: dict[str, int] = Field(
        default_factory=dict, description="Role -> ledger seq of the records that satisfy the gate."
    )


def _short(h: str | None) -> str:
    return (h or "?")[:12]


def _is_check(r: LedgerRecord) -> bool:
    return r.kind == "gradcheck" and r.payload.get("ok") is True


def _full_horizon(r: LedgerRecord) -> bool:
    # Checks are full-horizon unless the harness says it looked at a narrower window.
    return r.payload.get("full_horizon", True) is not False


def _patched_paths(r: LedgerRecord) -> set[str]:
    """The user's files a patch changed (warpgrad's own diagnostic files do not count as the program)."""
    p = r.payload
    paths = set(p.get("paths") or []) | set((p.get("after") or {}).keys()) or set(r.files)
    return paths - set(p.get("diagnostic") or [])


def with_provenance(records: list[LedgerRecord]) -> list[LedgerRecord]:
    """Records whose `files` also name the program a shrunk copy was cut from.

    A check that ran `sim_shrunk.py` exercised `sim.py` as it was when `shrink` copied it (only values
    differ, and shrink proves that). So when a record's file is a shrink output with the same hash, the
    source path and its hash at shrink time are added: patching `sim.py` afterwards makes the check stale
    until the copy is cut again, and a check on a fresh copy counts as exercising the patched `sim.py`.
    """
    copies: dict[tuple[str, str], tuple[str, str]] = {}
    out = []
    for r in records:
        if r.kind == "shrink" and r.payload.get("source_sha256"):
            copies[(r.payload.get("output"), r.payload.get("sha256"))] = (r.payload["script"],
                                                                          r.payload["source_sha256"])
        extra = {copies[(k, v)][0]: copies[(k, v)][1] for k, v in r.files.items() if (k, v) in copies}
        extra = {k: v for k, v in extra.items() if k not in r.files}
        out.append(r.model_copy(update={"files": {**r.files, **extra}}) if extra and r.kind != "shrink" else r)
    return out


def _objective(r: LedgerRecord) -> tuple[float | None, list[float]]:
    """Final objective and trajectory of a workflow run record (None when it reports none)."""
    p = r.payload
    traj_raw = p.get("loss_trajectory") or []
    traj: list[float] = []
    for v in traj_raw:
        try:
            traj.append(float(v))
        except (TypeError, ValueError):
            traj.append(math.nan)  # None from a JSON null is a failed value, not a missing one
    final = p.get("final_loss")
    if final is None and traj:
        return traj[-1], traj
    try:
        return (float(final) if final is not None else None), traj
    except (TypeError, ValueError):
        return math.nan, traj


def _run_failed(r: LedgerRecord) -> bool:
    p = r.payload
    if p.get("ok") is False or p.get("timed_out") or p.get("signal"):
        return True
    rc = p.get("returncode")
    return rc is not None and rc != 0


def objective_improves(before: LedgerRecord, after: LedgerRecord) -> tuple[bool, str]:
    """Does the workflow run `after` improve on `before`? Returns the verdict and why, in words.

    Lower is better unless the run says `objective_direction: "max"`. A finite final objective improves
    on a non-finite one only when the later run's own trajectory also improves (the skill's rule: an
    exploding optimisation must now improve, not merely avoid NaN).
    """
    if _run_failed(after):
        return False, f"the rerun (record {after.seq}) failed"
    b, _ = _objective(before)
    a, traj = _objective(after)
    sign = -1.0 if after.payload.get("objective_direction") == "max" else 1.0
    if a is None:
        return False, f"the rerun (record {after.seq}) reports no final_loss or loss_trajectory"
    if not math.isfinite(a):
        return False, f"the rerun (record {after.seq}) still ends at a non-finite objective"
    if b is None or not math.isfinite(b) or _run_failed(before):
        if len(traj) >= 2 and all(math.isfinite(v) for v in traj) and sign * traj[-1] < sign * traj[0]:
            return True, "finite and improving where the run before was not"
        return False, (f"the run before (record {before.seq}) was non-finite or failed, but the rerun "
                       f"(record {after.seq}) does not show its objective improving over its own trajectory")
    if sign * a < sign * b:
        return True, "final objective improved"
    return False, (f"the rerun (record {after.seq}) ends at {a!r}, which does not improve on {b!r} "
                   f"(record {before.seq})")


def _same_workflow(a: LedgerRecord, b: LedgerRecord, *, same_args: bool = False) -> bool:
    """Runs of the same script (and, with same_args, the same arguments: a rerun at a smaller learning
    rate does not show that a patch fixed anything)."""
    sa, sb = a.payload.get("script"), b.payload.get("script")
    if not (sa is None or sb is None or sa == sb):
        return False
    return not same_args or (a.payload.get("args") or []) == (b.payload.get("args") or [])


def _stale(workspace: Path, r: LedgerRecord) -> list[str]:
    return changed_files(workspace, r.files)


def _fixed(records: list[LedgerRecord], workspace: Path) -> tuple[list[str], dict[str, int]]:
    failing = [r for r in records if _is_check(r) and r.payload.get("passed") is False]
    if not failing:
        return [("a failing FD check (a gradcheck record with ok=true and passed=false): run gradcheck on the "
                 "program before patching so the wrong gradient is on record")], {}
    patches = [r for r in records if r.kind == "patch"]
    best: tuple[list[str], dict[str, int]] | None = None
    for f in reversed(failing):
        cand = _fixed_from(f, records, patches, workspace)
        if best is None or len(cand[0]) < len(best[0]):
            best = cand
        if not best[0]:
            break
    assert best is not None
    return best


def _fixed_from(
    f: LedgerRecord, records: list[LedgerRecord], patches: list[LedgerRecord], workspace: Path
) -> tuple[list[str], dict[str, int]]:
    ev = {"failing_check": f.seq}
    after_f = [p for p in patches if p.seq > f.seq and _patched_paths(p)]
    if not after_f:
        msg = f"a patch (edit_file or apply_patch) of the user's program recorded after the failing check (record {f.seq})"
        if any(p.seq > f.seq for p in patches):
            msg += "; the patches since only changed warpgrad's own diagnostic files (probe, shrunk copy)"
        return [msg], ev
    first_patch = after_f[0]
    hid = f.payload.get("harness_id")
    passing = [r for r in records if _is_check(r) and r.payload.get("passed") is True and r.seq > first_patch.seq]
    same = [r for r in passing if hid and r.payload.get("harness_id") == hid]
    if not same:
        msg = (f"a passing FD check after the patch with the same harness as the failing check (record "
               f"{f.seq}, harness_id {_short(hid)}): rerun gradcheck with the same script or probe, eps policy, "
               "seed and iteration")
        if passing:
            msg += (f"; the passing check (record {passing[-1].seq}) used a different harness "
                    f"({_short(passing[-1].payload.get('harness_id'))}), so it does not compare like with like")
        return [msg, *_after_patch_needs(records, after_f[-1], first_patch, workspace, set())[0]], ev
    best: tuple[list[str], dict[str, int]] | None = None
    for a in reversed(same):
        missing: list[str] = []
        e = dict(ev, passing_check=a.seq)
        in_fix = [p for p in after_f if p.seq < a.seq]
        e["patch"] = in_fix[-1].seq
        patched = set().union(*(_patched_paths(p) for p in in_fix))
        stale = _stale(workspace, a)
        if not a.files:
            missing.append(f"the passing check (record {a.seq}) lists no files it imported, so it cannot be tied "
                           "to the program on disk: rerun gradcheck through the shipped program")
        elif stale:
            missing.append(f"the passing check (record {a.seq}) is stale: {', '.join(sorted(stale))} changed on "
                           "disk after it ran; rerun gradcheck on the files as they are now")
        if a.files and not (patched & set(a.files)):
            missing.append(f"the passing check (record {a.seq}) never imported a patched file "
                           f"({', '.join(sorted(patched))}); verify the patched program itself, not a "
                           "re-implementation of it")
        elif a.files and all(a.files[p] == f.files.get(p) for p in patched & set(a.files)):
            missing.append(f"the passing check (record {a.seq}) ran the same bytes of the patched files as the "
                           f"failing check (record {f.seq}): the patch was undone or changed nothing, so the pass "
                           "is noise or a flaky harness, not a fix")
        more, e2 = _after_patch_needs(records, in_fix[-1], first_patch, workspace, patched)
        missing += more
        e.update(e2)
        if best is None or len(missing) < len(best[0]):
            best = (missing, e)
        if not missing:
            break
    assert best is not None
    return best


def _after_patch_needs(
    records: list[LedgerRecord], last_patch: LedgerRecord, first_patch: LedgerRecord, workspace: Path,
    patched: set[str],
) -> tuple[list[str], dict[str, int]]:
    """Tracker and workflow-rerun requirements after the fix's last patch."""
    missing: list[str] = []
    ev: dict[str, int] = {}
    trackers = [r for r in records if r.kind == "tracker" and r.seq > last_patch.seq]
    clean = [t for t in trackers if _tracker_clean(t)]
    good = [t for t in clean if t.files and not _stale(workspace, t) and (not patched or patched & set(t.files))]
    if good:
        ev["tracker"] = good[-1].seq
    elif clean:
        t = clean[-1]
        why = ("lists no files" if not t.files else "is stale (files changed since)" if _stale(workspace, t)
               else "never imported a patched file")
        missing.append(f"a clean overwrite-tracker run on the patched files as they are now: the clean tracker "
                       f"run (record {t.seq}) {why}; rerun the tracker")
    elif trackers:
        missing.append(f"a clean overwrite-tracker run after the patch: the tracker run (record {trackers[-1].seq}) "
                       "reported warnings or failed; fix them or explain them, then rerun the tracker")
    else:
        missing.append(f"a clean overwrite-tracker run after the patch (record {last_patch.seq}): run the tracker "
                       "(instrument) on the patched program")

    confirmed = [r for r in records if r.kind == "symptom_gone" and r.seq > last_patch.seq
                 and r.payload.get("user_confirmed") is True]
    if confirmed:
        ev["symptom_gone"] = confirmed[-1].seq
        return missing, ev
    reruns = [r for r in records if r.kind == "run" and r.seq > last_patch.seq and not r.payload.get("changed")]
    befores = [r for r in records if r.kind == "run" and r.seq < first_patch.seq]
    if not reruns:
        missing.append(f"a rerun of the user's workflow after the patch (record {last_patch.seq}) whose objective "
                       "improves on the run before it: run_script the workflow again (or the user confirms the "
                       "symptom is gone)")
        return missing, ev
    why = ""
    for after in reversed(reruns):
        stale = _stale(workspace, after)
        if stale:
            why = f"the rerun (record {after.seq}) is stale: {', '.join(sorted(stale))} changed since"
            continue
        before = next((b for b in reversed(befores) if _same_workflow(b, after, same_args=True)), None)
        if before is None:
            why = ("there is no run of the same workflow (same script and arguments) before the patch to compare "
                   "with; run the unpatched workflow (undo, run, redo) or have the user confirm the symptom is gone")
            continue
        ok, why = objective_improves(before, after)
        if ok:
            ev["run_before"], ev["run_after"] = before.seq, after.seq
            return missing, ev
    missing.append(f"a workflow rerun whose objective improves on the run before the patch: {why}")
    return missing, ev


def _tracker_clean(t: LedgerRecord) -> bool:
    p = t.payload
    if p.get("ok") is False:
        return False
    if "clean" in p:
        return p["clean"] is True
    w = p.get("warnings")
    if isinstance(w, list):
        return not w
    n = p.get("n_warnings", p.get("warning_count"))
    return n == 0


def _unmodified_check(records: list[LedgerRecord], workspace: Path) -> tuple[list[str], dict[str, int]]:
    """A passing full-horizon check on the program as it was before any patch."""
    originals: dict[str, str | None] = {}
    for p in (r for r in records if r.kind == "patch"):
        for rel, sha in (p.payload.get("before") or {}).items():
            originals.setdefault(rel, sha)
    modified = [rel for rel, sha in originals.items() if disk_hashes(workspace, [rel])[rel] != sha]
    passing = [r for r in records if _is_check(r) and r.payload.get("passed") is True and _full_horizon(r)]
    missing: list[str] = []
    if modified:
        missing.append(f"the program is modified ({', '.join(sorted(modified))} differ from their originals): "
                       "this outcome is about the unmodified program; undo the patches (warpgrad undo --all) or "
                       "finish with another outcome")
    good = [r for r in passing if r.files and not _stale(workspace, r)]
    if not good:
        if passing:
            r = passing[-1]
            what = "lists no files it imported" if not r.files else (
                f"is stale ({', '.join(sorted(_stale(workspace, r)))} changed since)")
            missing.append(f"a passing full-horizon FD check on the files as they are now: the passing check "
                           f"(record {r.seq}) {what}; rerun gradcheck")
        else:
            missing.append("a passing full-horizon FD check (gradcheck over the user's full objective and "
                           "horizon, ok=true, passed=true) on the unmodified program")
        return missing, {}
    a = good[-1]
    contra = [r for r in records if _is_check(r) and r.payload.get("passed") is False and r.files == a.files
              and r.payload.get("harness_id") == a.payload.get("harness_id")]
    if contra:
        missing.append(f"the failing check (record {contra[-1].seq}) used the same harness on the same files as "
                       f"the passing check (record {a.seq}): resolve the contradiction (seed? noise band?) first")
    return missing, {"passing_check": a.seq}


def _not_a_gradient_bug(records: list[LedgerRecord], workspace: Path) -> tuple[list[str], dict[str, int]]:
    missing, ev = _unmodified_check(records, workspace)
    runs = [r for r in records if r.kind == "run"]
    found = None
    why = ("a workflow run with the suspected non-gradient cause changed (its payload's `changed` names what, "
           "e.g. a smaller learning rate, or it ran with different args) whose objective improves on the "
           "baseline run of the same script")
    for v in reversed(runs):
        base = next((b for b in reversed(runs) if b.seq < v.seq and _same_workflow(b, v) and not b.payload.get(
            "changed") and (v.payload.get("changed") or b.payload.get("args") != v.payload.get("args"))), None)
        if base is None or not (v.payload.get("changed") or v.payload.get("args") != base.payload.get("args")):
            continue
        ok, reason = objective_improves(base, v)
        if ok:
            found = (base, v)
            break
        if "(the variant run" not in why:
            why += f" (the variant run, record {v.seq}, does not: {reason})"
    if found:
        ev["baseline_run"], ev["variant_run"] = found[0].seq, found[1].seq
    else:
        missing.append(why)
    return missing, ev


def _blocked(records: list[LedgerRecord], workspace: Path) -> tuple[list[str], dict[str, int]]:
    failed = [r for r in records if r.kind == "run" and _run_failed(r)]
    why = [r for r in failed if any(r.payload.get(k) for k in ("error", "stderr_tail", "reason", "stdout_tail"))]
    if not why:
        return [("a recorded failed run that shows why the program cannot run (a run record with ok=false and "
                 "its error or stderr): run_script the program so the failure is on record")], {}
    current = [r for r in why if not _stale(workspace, r)]
    if not current:
        return [(f"the failed run (record {why[-1].seq}) is stale: the files changed since; run it again to show "
                 "it still fails")], {}
    return [], {"failed_run": current[-1].seq}


def _diagnosis_only(records: list[LedgerRecord], workspace: Path) -> tuple[list[str], dict[str, int]]:
    checks = [r for r in records if _is_check(r) and r.payload.get("passed") is not None and _full_horizon(r)]
    good = [r for r in checks if r.files and not _stale(workspace, r)]
    if good:
        return [], {"check": good[-1].seq}
    if checks:
        return [(f"a full-horizon FD check on the files as they are now: the check (record {checks[-1].seq}) "
                 "lists no files or is stale; rerun gradcheck")], {}
    return ["a full-horizon FD check (gradcheck with ok=true over the user's objective and horizon)"], {}


_RULES = {
    "fixed": _fixed,
    "gradients_correct": _unmodified_check,
    "not_a_gradient_bug": _not_a_gradient_bug,
    "blocked": _blocked,
    "diagnosis_only": _diagnosis_only,
}


def check_finish(workspace: Path, outcome: str) -> GateResult:
    """Decide whether the ledger of `workspace` proves `outcome`; list what is missing if not.

    The rules (each piece must be in the ledger, and checks must match the files on disk now):
    - `fixed`: a failing FD check; a patch after it; a passing check after the patch with the same
      `harness_id` whose `files` match disk and include a patched file; a clean tracker run after the
      patch on those files; a workflow rerun after the patch whose objective improves on the run before
      the patch (or a `symptom_gone` record the user confirmed).
    - `gradients_correct`: a passing full-horizon check on the unmodified program.
    - `not_a_gradient_bug`: as `gradients_correct`, plus a workflow run with the suspected cause changed
      that improves on the baseline run.
    - `blocked`: a failed run that records why.
    - `diagnosis_only`: a full-horizon check (passing or failing) on the files as they are.

    Args:
        workspace: The workspace root.
        outcome: One of `OUTCOMES`.

    Returns:
        The verdict, the missing pieces as actions, and the seqs of the records that satisfied it.
    """
    if outcome not in _RULES:
        return GateResult(outcome=outcome, accepted=False,
                          missing=[f"a known outcome: one of {', '.join(OUTCOMES)}"])
    records, check = Ledger(workspace).read()
    records = with_provenance(records)
    missing: list[str] = [
        f"an intact ledger: {p}; the evidence cannot be trusted until a person resolves this"
        for p in check.problems
    ]
    more, ev = _RULES[outcome](records, Path(workspace))
    missing += more
    return GateResult(outcome=outcome, accepted=not missing, missing=missing, evidence=ev)
