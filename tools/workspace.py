"""Workspace tools: look at the user's code, write diagnostic files, patch safely.

Safety rules every tool here follows (and other tools should, through `resolve_path`):
- paths resolve inside the workspace root: absolute paths elsewhere, `..` escapes and symbolic links
  that lead out are refused;
- `.warpgrad/` (ledger, backups) is not writable through the tools;
- a user's file is never overwritten by `write_file` and never deleted; a file warpgrad created is
  tracked in `.warpgrad/created.json` and may be rewritten (or removed by `undo`);
- every patch backs the file up to `.warpgrad/backups/` first, refuses to break Python syntax, and is
  recorded in the ledger (kind `patch`) with its diff and before/after sha256;
- changes are serialized (`edit_lock`, from the read to the ledger record), written ahead and capped
  in size (`MAX_EDIT_CHARS`, `MAX_FILE_BYTES`).

Path safety lives in `paths.py`; backups, write-ahead patches and `undo` in `backups.py` (both
re-exported here); writing, parsing and applying unified diffs (pure text) in `patch.py`.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import regex
from pydantic import BaseModel, Field

from .backups import (  # some re-exported: tools and commands import them from here
    UndoResult,
    apply_changes,
    atomic_write,
    created_files,
    edit_lock,
    mark_created,
    require_intact_ledger,
    tmp_dir,
    undo,
)
from .files import MAX_FILE_BYTES, check_writable_new
from .files import read_text_file as _read_text
from .ledger import STATE_DIR, Ledger
from .patch import FilePatch, PatchError, apply_hunks, parse_unified_diff, unified_diff
from .paths import rel_or_raw, rel_path, resolve_path  # noqa: F401 -- re-exported
from .registry import ToolError, tool
from .render import READ_BUDGET, read_file_text

MAX_READ_LINES = 400
MAX_LINE_CHARS = 400
MAX_SEARCH_RESULTS = 200
MAX_EDIT_CHARS = 200_000  # one edit's text, a diff or a written file: a fix is small; the ledger keeps it
MAX_OVERVIEW_FILES = 300
SEARCH_TIMEOUT_S = 5.0
SKIP_DIRS = {".git", ".hg", ".svn", STATE_DIR, "__pycache__", ".venv", "venv", "env", "node_modules",
             ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", ".tox", ".eggs"}


def syntax_error(text: str, rel: str) -> str | None:
    """The SyntaxError of Python source `text` as one line with its location, or None when it parses."""
    try:
        # Not the real file name: for some errors Python fills `e.text` from the file of that name, which
        # would quote the line on disk instead of the proposed one.
        ast.parse(text, filename="<proposed>")
    except SyntaxError as e:
        where = f"line {e.lineno}" + (f", column {e.offset}" if e.offset else "")
        lines = text.splitlines()
        src = lines[e.lineno - 1] if e.lineno and 0 < e.lineno <= len(lines) else ""
        return f"{rel}: {e.msg} ({where})" + (f": {src.strip()}" if src.strip() else "")
    return None


# ---------------------------------------------------------------------------------------------------
# workspace_overview
# ---------------------------------------------------------------------------------------------------


def warp_version() -> str | None:
    """Installed warp-lang version from package metadata (the runtime never imports Warp)."""
    try:
        return importlib.metadata.version("warp-lang")
    except importlib.metadata.PackageNotFoundError:
        return None


def entry_point_reasons(source: str) -> list[str]:
    """Why a Python source looks like a script to run: a `__main__` guard, module-level tape/backward."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    reasons = []
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_guard(node.test):
            reasons.append("has `if __name__ == \"__main__\"`")
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                f = sub.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if name == "Tape" and "module-level wp.Tape" not in reasons:
                    reasons.append("module-level wp.Tape")
                elif name == "backward" and "module-level backward()" not in reasons:
                    reasons.append("module-level backward()")
    return reasons


def _is_main_guard(test: ast.expr) -> bool:
    if not isinstance(test, ast.Compare) or len(test.comparators) != 1:
        return False
    sides = [test.left, test.comparators[0]]
    return (any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


class WorkspaceOverviewArgs(BaseModel):
    glob: str | None = Field(None, description="Only list files matching this glob (default: all).")


class FileEntry(BaseModel):
    path: str = Field(description="Workspace-relative path.")
    bytes: int = Field(description="Size in bytes.")
    created_by_warpgrad: bool = Field(False, description="True for diagnostic files warpgrad wrote.")


class EntryPoint(BaseModel):
    path: str = Field(description="Workspace-relative path of a script that looks runnable.")
    reasons: list[str] = Field(description="Why it looks like an entry point.")


class WorkspaceOverviewResult(BaseModel):
    root: str = Field(description="Absolute workspace root.")
    files: list[FileEntry] = Field(description=f"Files (at most {MAX_OVERVIEW_FILES}).")
    files_truncated: bool = Field(description="True when there are more files than listed.")
    entry_points: list[EntryPoint] = Field(description="Scripts with a __main__ guard or module-level tape/backward.")
    warp_version: str | None = Field(description="Installed warp-lang version (from package metadata).")
    device_note: str = Field(description="Where runs execute; the device each run used is in its result.")
    size_knobs: dict[str, list[dict[str, Any]]] = Field(
        description="Per entry point, the size knobs `shrink` can change (name, value, line, category).")
    ledger: dict[str, Any] = Field(description="Prior evidence in .warpgrad/ledger.jsonl: counts, last check.")


@tool(args=WorkspaceOverviewArgs, result=WorkspaceOverviewResult)
def workspace_overview(args: WorkspaceOverviewArgs, workspace: Path) -> WorkspaceOverviewResult:
    """Survey the workspace: files, runnable scripts, Warp version, size knobs to shrink, prior evidence.

    Start here. Entry points are scripts with `if __name__ == "__main__"` or a module-level tape/backward.
    """
    from .shrink import find_knobs  # shrink imports this module

    root = Path(workspace).resolve()
    created = created_files(root)
    files: list[FileEntry] = []
    entries: list[EntryPoint] = []
    knobs: dict[str, list[dict[str, Any]]] = {}
    truncated = False
    for p in iter_files(root, args.glob):
        rel = p.relative_to(root).as_posix()
        if len(files) >= MAX_OVERVIEW_FILES:
            truncated = True
            break
        size = p.stat().st_size
        files.append(FileEntry(path=rel, bytes=size, created_by_warpgrad=rel in created))
        if p.suffix == ".py" and size <= MAX_FILE_BYTES:
            src = p.read_text(encoding="utf-8", errors="replace")
            if reasons := entry_point_reasons(src):
                entries.append(EntryPoint(path=rel, reasons=reasons))
                found = [] if rel in created else find_knobs(src)  # a shrunk copy's knobs are noise
                if found:
                    knobs[rel] = [k.model_dump(include={"id", "name", "value", "line", "category", "kind"})
                                  for k in found]
    return WorkspaceOverviewResult(
        root=str(root), files=files, files_truncated=truncated, entry_points=entries, warp_version=warp_version(),
        device_note="user code runs in subprocesses on Warp's default device (CPU when no CUDA GPU is present); "
                    "each run and check records the device it used",
        size_knobs=knobs, ledger=Ledger(root).summary(),
    )


# ---------------------------------------------------------------------------------------------------
# read_file
# ---------------------------------------------------------------------------------------------------


class ReadFileArgs(BaseModel):
    path: str = Field(description="Workspace-relative path of the file to read.")
    start_line: int = Field(1, ge=1, description="First line to return (1-based).")
    max_lines: int = Field(200, ge=1, le=MAX_READ_LINES, description=f"How many lines (at most {MAX_READ_LINES}).")


class ReadFileResult(BaseModel):
    path: str = Field(description="Workspace-relative path.")
    start_line: int = Field(description="First line returned.")
    end_line: int = Field(description="Last line returned (0 for an empty file).")
    total_lines: int = Field(description="Lines in the whole file.")
    text: str = Field(description="The lines, each prefixed with its number and a tab.")
    truncated: bool = Field(description="True when the file continues after `end_line`.")
    next_start_line: int | None = Field(None, description="Pass as start_line to read on, when truncated.")


@tool(args=ReadFileArgs, result=ReadFileResult, render=read_file_text, budget=READ_BUDGET)
def read_file(args: ReadFileArgs, workspace: Path) -> ReadFileResult:
    """Read a window of a workspace file as numbered lines (at most 400 lines per call; long lines are cut).

    Use `start_line` to page through long files; line numbers match what `edit_file` and tracebacks use.
    """
    p = resolve_path(workspace, args.path)
    rel = rel_path(workspace, p)
    lines = _read_text(p, rel).splitlines()
    start = args.start_line
    if lines and start > len(lines):
        raise ToolError(f"{rel} has {len(lines)} lines; start_line {start} is past the end")
    window = lines[start - 1 : start - 1 + args.max_lines]
    out = []
    for i, raw in enumerate(window, start):
        line = raw
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f" ... [{len(line) - MAX_LINE_CHARS} more characters]"
        out.append(f"{i}\t{line}")
    end = start + len(window) - 1 if window else 0
    truncated = end < len(lines)
    return ReadFileResult(path=rel, start_line=start, end_line=end, total_lines=len(lines), text="\n".join(out),
                          truncated=truncated, next_start_line=end + 1 if truncated else None)


# ---------------------------------------------------------------------------------------------------
# search_code
# ---------------------------------------------------------------------------------------------------


def iter_files(workspace: Path, pattern: str | None = None) -> Iterator[Path]:
    """Regular files in the workspace, sorted, skipping VCS/venv/cache dirs and links that lead out."""
    root = Path(workspace).resolve()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_symlink() and not p.resolve().is_relative_to(root):
                continue
            if not p.is_file():
                continue
            rel = p.relative_to(root).as_posix()
            if pattern and not (Path(rel).match(pattern) or Path(name).match(pattern)):
                continue
            yield p


class SearchCodeArgs(BaseModel):
    pattern: str = Field(description="Text to find; a Python regular expression when `regex` is true.")
    regex: bool = Field(False, description="Treat `pattern` as a regular expression.")
    glob: str | None = Field(None, description="Only files matching this glob, e.g. '*.py' or 'sim/*.py'.")
    case_sensitive: bool = Field(True, description="Match case exactly.")
    max_results: int = Field(50, ge=1, le=MAX_SEARCH_RESULTS,
                             description=f"Stop after this many matching lines (at most {MAX_SEARCH_RESULTS}).")


class SearchHit(BaseModel):
    path: str = Field(description="Workspace-relative path.")
    line: int = Field(description="1-based line number.")
    text: str = Field(description="The matching line (cut when long).")


class SearchCodeResult(BaseModel):
    hits: list[SearchHit] = Field(description="Matching lines in path order.")
    truncated: bool = Field(description="True when there were more matches than max_results.")
    message: str = Field("", description="A hint when the results were cut.")


@tool(args=SearchCodeArgs, result=SearchCodeResult)
def search_code(args: SearchCodeArgs, workspace: Path) -> SearchCodeResult:
    """Search the workspace's text files for a string or regex; returns matching lines with their numbers.

    Results are bounded: past `max_results` the search stops and asks for a narrower query; a regex
    that runs past a few seconds is stopped with an error.
    """
    # The `regex` engine, not `re`: its matches take a timeout, so a pattern with catastrophic
    # backtracking (`(a|aa)+$`) costs at most SEARCH_TIMEOUT_S instead of freezing the caller.
    flags = regex.VERSION0 | (0 if args.case_sensitive else regex.IGNORECASE)
    try:
        rx = regex.compile(args.pattern if args.regex else regex.escape(args.pattern), flags)
    except regex.error as e:
        raise ToolError(f"bad regular expression {args.pattern!r}: {e}; fix it or pass regex=false") from None
    deadline = time.monotonic() + SEARCH_TIMEOUT_S
    hits: list[SearchHit] = []
    for p in iter_files(workspace, args.glob):
        if p.stat().st_size > MAX_FILE_BYTES:
            continue
        data = p.read_bytes()
        if b"\0" in data[:8192]:
            continue
        text = data.decode("utf-8", errors="replace")
        for i, line in enumerate(text.splitlines(), 1):
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                found = rx.search(line, timeout=left)
            except TimeoutError:
                raise ToolError(f"search stopped after {SEARCH_TIMEOUT_S:.0f} s at {rel_path(workspace, p)} line {i}: "
                                "the pattern backtracks too much (nested repeats like `(a+)+` or `(a|aa)+`); "
                                "simplify it, or narrow the search with glob") from None
            if found:
                if len(hits) == args.max_results:
                    return SearchCodeResult(
                        hits=hits, truncated=True,
                        message=f"more than {args.max_results} matches; narrow the query (a more specific "
                                "pattern, or glob='file.py' to search one file)")
                cut = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " ..."
                hits.append(SearchHit(path=rel_path(workspace, p), line=i, text=cut))
    return SearchCodeResult(hits=hits, truncated=False, message="" if hits else "no matches")


# ---------------------------------------------------------------------------------------------------
# write_file
# ---------------------------------------------------------------------------------------------------


class WriteFileArgs(BaseModel):
    path: str = Field(description="Workspace-relative path of a NEW diagnostic file (probe, repro script).")
    content: str = Field(max_length=MAX_EDIT_CHARS, description="The whole file content.")
    purpose: str = Field("", description="One line saying what the file is for (shown in the report).")


class WriteFileResult(BaseModel):
    path: str = Field(description="Workspace-relative path written.")
    sha256: str = Field(description="sha256 of the content written.")
    bytes: int = Field(description="Bytes written.")
    seq: int = Field(description="Ledger record of the write.")


@tool(args=WriteFileArgs, result=WriteFileResult, read_only=False)
def write_file(args: WriteFileArgs, workspace: Path) -> WriteFileResult:
    """Create a new diagnostic file (an FD probe, a repro script) in the workspace.

    Refuses to overwrite any file the user has: change user files with `edit_file` or `apply_patch`. It
    may rewrite a file it created itself. Python files must parse. The file is kept and listed in the report.
    """
    p = resolve_path(workspace, args.path)
    rel = rel_path(workspace, p)
    if p.suffix == ".py" and (err := syntax_error(args.content, rel)):
        raise ToolError(f"not written: the content is not valid Python: {err}")
    data = args.content.encode("utf-8")
    sha = hashlib.sha256(data).hexdigest()
    with edit_lock(workspace):
        check_writable_new(workspace, p)
        require_intact_ledger(workspace)
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(p, data, staging=tmp_dir(workspace))
        mark_created(workspace, rel, sha)
        rec = Ledger(workspace).append("file", {"path": rel, "sha256": sha, "purpose": args.purpose},
                                       tool="write_file", files={rel: sha})
    return WriteFileResult(path=rel, sha256=sha, bytes=len(data), seq=rec.seq)


# ---------------------------------------------------------------------------------------------------
# edit_file
# ---------------------------------------------------------------------------------------------------


class EditFileArgs(BaseModel):
    path: str = Field(description="Workspace-relative path of the file to change.")
    old_text: str = Field(min_length=1, max_length=MAX_EDIT_CHARS,
                          description="Exact text to replace, including indentation.")
    new_text: str = Field(max_length=MAX_EDIT_CHARS, description="Replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of requiring exactly one.")
    reason: str = Field("", description="Why this change fixes the gradient (recorded with the patch).")


class PatchResult(BaseModel):
    paths: list[str] = Field(description="Files changed.")
    diff: str = Field(description="Unified diff of the change.")
    before: dict[str, str | None] = Field(description="sha256 of each file before (None: the patch created it).")
    after: dict[str, str | None] = Field(description="sha256 of each file after.")
    backup_op: str = Field(description="Backup id in .warpgrad/backups/ (`warpgrad undo` restores it).")
    seq: int = Field(description="Ledger record of the patch.")


@tool(args=EditFileArgs, result=PatchResult, read_only=False, confirm=True)
def edit_file(args: EditFileArgs, workspace: Path) -> PatchResult:
    """Replace exact text in a workspace file (must match exactly once unless replace_all), as a recorded patch.

    The file is backed up first; an edit that would break Python syntax is refused and the file is left
    as it was. The diff and before/after hashes go to the ledger. Keep fixes minimal.
    """
    p = resolve_path(workspace, args.path)
    rel = rel_path(workspace, p)
    with edit_lock(workspace):  # from the read to the ledger record: a concurrent edit waits, none is lost
        return _edit_locked(args, workspace, p, rel)


def _edit_locked(args: EditFileArgs, workspace: Path, p: Path, rel: str) -> PatchResult:
    old = _read_text(p, rel)
    n = old.count(args.old_text)
    if n == 0:
        hint = _closest_hint(old, args.old_text)
        raise ToolError(f"old_text was not found in {rel}; it must match exactly, whitespace included. "
                        f"Read the file again with read_file.{hint}")
    if n > 1 and not args.replace_all:
        lines = _match_lines(old, args.old_text)
        raise ToolError(f"old_text occurs {n} times in {rel} (lines {', '.join(map(str, lines))}); include more "
                        "surrounding lines so it matches once, or set replace_all=true")
    new = old.replace(args.old_text, args.new_text) if args.replace_all else old.replace(args.old_text,
                                                                                          args.new_text, 1)
    if new == old:
        raise ToolError("new_text equals old_text: nothing to change")
    return _commit(workspace, {rel: (old, new, False)}, "edit_file", args.reason)


def _match_lines(text: str, sub: str) -> list[int]:
    out, start = [], 0
    while (i := text.find(sub, start)) >= 0:
        out.append(text.count("\n", 0, i) + 1)
        start = i + 1
    return out


def _closest_hint(text: str, sub: str) -> str:
    first = sub.strip().splitlines()[0].strip() if sub.strip() else ""
    if not first:
        return ""
    for i, line in enumerate(text.splitlines(), 1):
        if first in line:
            return f" Its first line appears at line {i}; check the lines after it and the indentation."
    return ""


def _commit(workspace: Path, files: dict[str, tuple[str, str, bool]], tool_name: str, reason: str) -> PatchResult:
    """Syntax-check every new text, then back up, write and record them as one patch (under `edit_lock`)."""
    for rel, (_, new, _) in files.items():
        if len(new.encode("utf-8")) > MAX_FILE_BYTES:
            raise ToolError(f"refused: {rel} would be {len(new.encode('utf-8'))} bytes after the edit, more than "
                            f"{MAX_FILE_BYTES}; warpgrad edits source files with small fixes")
    errors = [e for rel, (_, new, _) in files.items() if rel.endswith(".py") and (e := syntax_error(new, rel))]
    if errors:
        raise ToolError("refused: the edit breaks Python syntax, the file is unchanged: " + "; ".join(errors))
    diff = "".join(unified_diff(rel, old, new, new_file=created) for rel, (old, new, created) in files.items())
    expected = {rel: None if created else hashlib.sha256(old.encode("utf-8")).hexdigest()
                for rel, (old, _, created) in files.items()}
    payload = apply_changes(workspace, {rel: new for rel, (_, new, _) in files.items()}, tool_name, diff,
                            {"reason": reason} if reason else None, expected=expected)
    return PatchResult(paths=payload["paths"], diff=diff, before=payload["before"], after=payload["after"],
                       backup_op=payload["backup_op"], seq=payload["seq"])


# ---------------------------------------------------------------------------------------------------
# apply_patch (the diff itself is parsed and applied as text by `patch.py`)
# ---------------------------------------------------------------------------------------------------


class ApplyPatchArgs(BaseModel):
    diff: str = Field(max_length=MAX_EDIT_CHARS,
                      description="A unified diff ('--- a/path', '+++ b/path', @@ hunks) of workspace files.")
    reason: str = Field("", description="Why this change fixes the gradient (recorded with the patch).")


@tool(args=ApplyPatchArgs, result=PatchResult, read_only=False, confirm=True)
def apply_patch(args: ApplyPatchArgs, workspace: Path) -> PatchResult:
    """Apply a unified diff to workspace files as one recorded patch (all files or none).

    Every file is backed up first; hunk context must match the file exactly. A patch that would break
    Python syntax is refused and no file changes. It can create new files (from /dev/null) but not delete.
    """
    try:
        patches = parse_unified_diff(args.diff)
    except PatchError as e:
        raise ToolError(str(e)) from None
    with edit_lock(workspace):
        return _apply_locked(patches, args, workspace)


def _apply_locked(patches: list[FilePatch], args: ApplyPatchArgs, workspace: Path) -> PatchResult:
    changes: dict[str, tuple[str, str, bool]] = {}
    for fp in patches:
        if fp.new_path is None:
            raise ToolError(f"the diff deletes {fp.old_path}: warpgrad never deletes a user's file")
        if fp.old_path is not None and fp.old_path != fp.new_path:
            raise ToolError(f"the diff renames {fp.old_path} to {fp.new_path}: renames are not supported")
        p = resolve_path(workspace, fp.new_path)
        rel = rel_path(workspace, p)
        if rel in changes:
            raise ToolError(f"the diff patches {rel} twice; merge its hunks into one file section")
        if fp.old_path is None:
            if p.exists():
                raise ToolError(f"the diff creates {rel}, which already exists")
            old, created = "", True
        else:
            old, created = _read_text(p, rel), False
        try:
            changes[rel] = (old, apply_hunks(old, fp.hunks, rel), created)
        except PatchError as e:
            raise ToolError(str(e)) from None
    return _commit(workspace, changes, "apply_patch", args.reason)


def _atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """`atomic_write` for callers outside this module that stage next to the target (kept for them)."""
    atomic_write(path, data, mode)


# ---------------------------------------------------------------------------------------------------
# undo (the tool; `warpgrad undo` is the same function)
# ---------------------------------------------------------------------------------------------------


class UndoArgs(BaseModel):
    all_patches: bool = Field(False, description="Undo every patch of the session, newest first (default: the "
                              "latest patch only).")
    force: bool = Field(False, description="Restore even where a file changed after the patch (that change is lost).")


@tool(args=UndoArgs, result=UndoResult, name="undo", read_only=False)
def undo_tool(args: UndoArgs, workspace: Path) -> UndoResult:
    """Undo the latest patch (or all of them): put the patched files back from their backups, recorded in the
    ledger. Use it to take back a wrong or unwanted change; a right fix needs no undo (finish compares with
    the run diagnose made before the patch)."""
    return undo(workspace, all_patches=args.all_patches, force=args.force)
