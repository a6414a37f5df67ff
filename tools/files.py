"""Reading and creating workspace files safely: the checks shared by the file tools and `shrink`.

Kept below `workspace.py` (the tools) so that `shrink` and others can use them without importing the
tool module (which imports `shrink` for its knob survey).
"""

from __future__ import annotations

from pathlib import Path

from .backups import created_files
from .ledger import Ledger, sha256_file
from .paths import rel_path
from .registry import ToolError

MAX_FILE_BYTES = 2_000_000  # bigger files are data, not code


def check_writable_new(workspace: Path, target: Path) -> None:
    """Refuse to (over)write `target` unless it is new or a file warpgrad created and nobody changed since.

    Raises:
        ToolError: `target` is a user's file, a directory, or a warpgrad file edited outside warpgrad.
    """
    rel = rel_path(workspace, target)
    if target.is_dir():
        raise ToolError(f"{rel} is a directory")
    if not target.exists():
        return
    created = created_files(workspace)
    if rel not in created:
        raise ToolError(f"{rel} already exists and is the user's file: write_file only creates new diagnostic "
                        "files; pick a new name, or change the user's file with edit_file/apply_patch")
    if sha256_file(target) != created[rel]:
        raise ToolError(f"{rel} was created by warpgrad but changed since (by the user?); it is not overwritten. "
                        "Pick a new name")
    # created.json may come from anywhere (a cloned repository, the user's script): a SIGNED record of a
    # verified ledger must show warpgrad wrote it (an unsigned one can be appended by anything).
    records, check = Ledger(workspace).read()
    if not check.ok or not any(r.files.get(rel) == created[rel] and r.seq not in check.unsigned for r in records):
        raise ToolError(f"{rel} is listed in .warpgrad/created.json, but the evidence ledger never recorded "
                        "warpgrad writing it; it is treated as the user's file and not overwritten. Pick a new name")


def read_text_file(p: Path, rel: str) -> str:
    """The UTF-8 text of a workspace source file, refusing missing, huge and binary files with the reason."""
    if not p.is_file():
        raise ToolError(f"{rel} does not exist (or is not a file); list files with workspace_overview")
    if p.stat().st_size > MAX_FILE_BYTES:
        raise ToolError(f"{rel} is larger than {MAX_FILE_BYTES} bytes; warpgrad only reads source files")
    data = p.read_bytes()
    if b"\0" in data[:8192]:
        raise ToolError(f"{rel} is a binary file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ToolError(f"{rel} is not UTF-8 text ({e})") from None
