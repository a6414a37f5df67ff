"""Unified diffs as text: write one (`unified_diff`), read one (`parse_unified_diff`), apply its hunks to a
file's text (`apply_hunks`).

Pure text in, text out: no file system and no tool models. The `apply_patch` and `edit_file` tools in
`workspace.py` do the reading, writing, backups and records around it. The parser is our own (no
third-party dependency) because it must be exactly right on the file it patches.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass


class PatchError(ValueError):
    """The diff is malformed, or a hunk does not match the text (the message says which and where)."""


def unified_diff(rel: str, old: str, new: str, *, new_file: bool = False) -> str:
    """A unified diff of one file in `git diff` path style."""
    return "".join(difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True),
        fromfile="/dev/null" if new_file else f"a/{rel}", tofile=f"b/{rel}",
    ))


@dataclass
class Hunk:
    """One @@ hunk: where it starts in the old file and its lines."""

    old_start: int
    old_len: int
    lines: list[str]  # each starts with ' ', '-' or '+'; a trailing "\ No newline" is folded in
    no_newline_old: bool = False
    no_newline_new: bool = False


@dataclass
class FilePatch:
    """One file's section of a diff; a path is None on the /dev/null side (a created or deleted file)."""

    old_path: str | None
    new_path: str | None
    hunks: list[Hunk]


_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _strip_prefix(name: str) -> str | None:
    name = name.split("\t")[0].strip()
    if name == "/dev/null":
        return None
    if name.startswith(("a/", "b/")):
        return name[2:]
    return name


def parse_unified_diff(diff: str) -> list[FilePatch]:
    """Parse a unified diff (git or plain `diff -u` style) into file patches.

    Raises:
        PatchError: The text is not a well-formed unified diff.
    """
    lines = diff.split("\n")  # not splitlines(): a form feed inside a source line is content
    if lines and lines[-1] == "":
        lines.pop()
    i = 0
    out: list[FilePatch] = []
    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise PatchError(f"diff line {i + 1}: '---' header not followed by '+++'")
        old_path, new_path = _strip_prefix(lines[i][4:]), _strip_prefix(lines[i + 1][4:])
        i += 2
        hunks: list[Hunk] = []
        while i < len(lines) and lines[i].startswith("@@"):
            m = _HUNK_RE.match(lines[i])
            if not m:
                raise PatchError(f"diff line {i + 1}: malformed hunk header {lines[i]!r}")
            old_start, old_len = int(m.group(1)), int(m.group(2) or "1")
            new_len = int(m.group(4) or "1")
            i += 1
            hunk = Hunk(old_start=old_start, old_len=old_len, lines=[])
            n_old = n_new = 0
            while i < len(lines) and (n_old < old_len or n_new < new_len or lines[i].startswith("\\")):
                line = lines[i]
                if line.startswith("\\"):
                    last = hunk.lines[-1][:1] if hunk.lines else " "
                    if last in " -":
                        hunk.no_newline_old = True
                    if last in " +":
                        hunk.no_newline_new = True
                    i += 1
                    continue
                tag = line[:1] if line else " "  # some tools strip the space of empty context lines
                if tag not in " -+":
                    raise PatchError(f"diff line {i + 1}: hunk ended early (expected {old_len} old and {new_len} "
                                     f"new lines); check the @@ counts")
                body = line[1:] if line else ""
                hunk.lines.append(tag + body)
                n_old += tag in " -"
                n_new += tag in " +"
                i += 1
            if n_old != old_len or n_new != new_len:
                raise PatchError(f"hunk at old line {old_start}: counts in its @@ header do not match its lines")
            hunks.append(hunk)
        if not hunks:
            raise PatchError(f"diff for {new_path or old_path}: no hunks")
        out.append(FilePatch(old_path=old_path, new_path=new_path, hunks=hunks))
    if not out:
        raise PatchError("no file patches found: give a unified diff with '--- a/path', '+++ b/path' and @@ hunks")
    return out


def apply_hunks(text: str, hunks: list[Hunk], rel: str) -> str:
    """Apply hunks to `text`. Context must match exactly; a hunk may sit up to 50 lines from its stated spot.

    Raises:
        PatchError: A hunk's context or removed lines are not found.
    """
    src = text.split("\n")
    if src and src[-1] == "":
        src.pop()
    out: list[str] = []
    pos = 0  # index in src of the next line not yet copied
    offset = 0  # how far the file has drifted from the line numbers in the hunk headers
    final_nl = text.endswith("\n") or not text
    for h in hunks:
        old = [ln[1:] for ln in h.lines if ln[0] in " -"]
        new = [ln[1:] for ln in h.lines if ln[0] in " +"]
        stated = h.old_start - 1 if h.old_len else h.old_start  # a pure insertion goes after old_start
        at = _find_block(src, old, stated + offset, pos)
        if at is None:
            first = old[0] if old else ""
            raise PatchError(f"{rel}: hunk @@ -{h.old_start},{h.old_len} @@ does not match the file (context "
                             f"starting {first!r} not found near line {h.old_start}); read the file again and "
                             "regenerate the diff, or use edit_file")
        out.extend(src[pos:at])
        out.extend(new)
        pos = at + len(old)
        offset = at - stated
        if pos >= len(src):
            final_nl = not h.no_newline_new
    out.extend(src[pos:])
    result = "\n".join(out)
    return result + "\n" if out and final_nl else result


def _find_block(src: list[str], block: list[str], want: int, lo: int) -> int | None:
    if not block:
        return min(max(want, lo), len(src))
    for d in range(51):
        for at in (want - d, want + d) if d else (want,):
            if at >= lo and src[at : at + len(block)] == block:
                return at
    return None
