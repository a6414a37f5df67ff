"""The ledger's anchor outside the workspace: the workspace's id and the ledger's head, kept beside the key.

Everything inside the workspace can be rewritten by the user's script, so the two facts that make a
ledger this workspace's history live where only warpgrad and the user can write (the key folder, which
the sandbox hides): a random id for the workspace (keyed by its resolved path; every record's signed body
names it, so a ledger copied from another workspace names the wrong one), and the last sequence number
and hash written (so records removed from the end cannot be hidden by rewriting `.warpgrad/ledger.head`).

A workspace moved to another folder gets a new id: its old ledger then reads as another workspace's,
and a person starts a fresh one (the message says how).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from .keys import key_dir
from .state_files import StateDir

ANCHORS = "workspaces"


class WorkspaceAnchor(BaseModel):
    """`<key dir>/workspaces/<path digest>.id`: made once per workspace folder."""

    id: str = Field(description="Random id every record of this workspace's ledger names in its signed body.")
    path: str = Field(description="The workspace folder it was made for (for a person reading it).")


class OutsideHead(BaseModel):
    """`<key dir>/workspaces/<path digest>.head`: the last record written to this workspace's ledger."""

    workspace: str
    seq: int
    hash: str


class GarbledHead(BaseModel):
    """The outside head exists but cannot be read: a problem, never ignored."""

    path: str


def _stem(workspace: Path) -> str:
    return hashlib.sha256(str(Path(workspace).resolve()).encode("utf-8")).hexdigest()[:32]


def _anchors(create: bool) -> StateDir | None:
    d = key_dir()
    if create:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        top = StateDir(os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), d)
    except FileNotFoundError:
        return None
    with top:
        try:
            return top.sub(ANCHORS, create=create)
        except FileNotFoundError:
            return None


def head_path(workspace: Path) -> Path:
    """Where the outside head of this workspace lives (for messages)."""
    return key_dir() / ANCHORS / f"{_stem(workspace)}.head"


def workspace_id(workspace: Path, *, create: bool) -> str | None:
    """This workspace folder's id (made when absent and `create`); None when it has none yet."""
    d = _anchors(create)
    if d is None:
        return None
    name = f"{_stem(workspace)}.id"
    with d:
        data = d.read_bytes(name)
        if data is None:
            if not create:
                return None
            anchor = WorkspaceAnchor(id=secrets.token_hex(16), path=str(Path(workspace).resolve()))
            if _publish(d, name, anchor.model_dump_json().encode("utf-8")):
                return anchor.id
            data = d.read_bytes(name)  # another process made it first: use theirs
        return WorkspaceAnchor.model_validate_json(data or b"").id


def _publish(d: StateDir, name: str, data: bytes) -> bool:
    """Create `name` with `data` all at once (written under a temp name, then hard-linked: a reader never
    sees it empty); False when it exists already."""
    tmp, fd = d.new_temp(name + ".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, name, src_dir_fd=d.fd, dst_dir_fd=d.fd, follow_symlinks=False)
        except FileExistsError:
            return False
        return True
    finally:
        d.unlink(tmp)


def read_head(workspace: Path) -> OutsideHead | GarbledHead | None:
    """The outside head of this workspace's ledger (None: no record was ever written under binding)."""
    d = _anchors(create=False)
    if d is None:
        return None
    with d:
        data = d.read_bytes(f"{_stem(workspace)}.head")
    if data is None:
        return None
    try:
        return OutsideHead.model_validate_json(data)
    except ValidationError:
        return GarbledHead(path=str(head_path(workspace)))


def write_head(workspace: Path, head: OutsideHead) -> None:
    """Replace the outside head (called under the ledger's lock, after the record is on disk)."""
    d = _anchors(create=True)
    if d is None:  # made just above; keeps the type honest
        raise FileNotFoundError(key_dir())
    with d:
        d.write_atomic(f"{_stem(workspace)}.head", head.model_dump_json().encode("utf-8"), 0o600)


def forget_head(workspace: Path) -> None:
    """Drop the outside head (a person starting a fresh ledger); the workspace keeps its id."""
    d = _anchors(create=False)
    if d is None:
        return
    with d, contextlib.suppress(FileNotFoundError):
        d.unlink(f"{_stem(workspace)}.head")
