"""Ready fixes: the mechanical repair of a rule hit, as the exact `edit_file` call that applies it.

Only rules whose repair does not depend on the program's intent get one, and only where the source has
the shape the repair assumes; anywhere else there is no ready fix (the hypothesis keeps its prose fix):

- WG003 missing-tape-zero, on a reused tape recorded by `with TAPE:` each iteration: `TAPE.reset()` just
  before the `with`. A reset zeroes every gradient the tape reached and drops last iteration's launches,
  so each iteration starts as from a fresh tape (a `zero()` alone would keep replaying old launches).
- WG001 missing-requires-grad, on an allocation call (`wp.zeros(...)`, `wp.array(...)`, ...) with no
  `requires_grad` keyword: the keyword added as its last argument (Warp's own allocators only: a project
  helper need not take the keyword); a `requires_grad=False` written out becomes `True`.

The edit's `old_text` is the flagged statement's own lines, widened by neighbouring lines until it occurs
once in the file (`edit_file` refuses an ambiguous snippet); a file where it never becomes unique gets none.

An edit repairs its own rule hit and nothing else. A program can hold a second, independent bug that the first
one masks (a buffer without `requires_grad` stops the gradient before it reaches an in-place `*=` elsewhere):
the edit is then right but only part of the repair, and a check after it alone still fails. So each ready fix
lists the other rule hits of error severity that diagnose ranks as causes (`leaves`), and says it is partial
rather than offering itself as the whole fix.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from .quickchecks.base import Finding
from .quickchecks.source import ALLOCATORS, LIKE_ALLOCATORS, SourceModule


class EditCall(BaseModel):
    path: str
    old_text: str
    new_text: str
    reason: str = ""


class ReadyFix(BaseModel):
    """A repair the model can apply in one call: `tool` with exactly these `arguments`."""

    rule: str = Field(description="The rule hit it repairs (WGnnn).")
    tool: Literal["edit_file"] = "edit_file"
    arguments: EditCall
    leaves: list[str] = Field([], description="Other error-severity rule hits diagnose ranks as causes that this "
                              "edit does not touch (`WGnnn name at file:line`). Non-empty: the edit is only part of "
                              "the repair; fix (or rule out) these too before the check.")

    def call_text(self) -> str:
        return f"{self.tool} {json.dumps(self.arguments.model_dump(), ensure_ascii=False)}"


def _unique_snippet(lines: list[str], first: int, last: int, source: str) -> tuple[int, int] | None:
    """Line span (0-based, inclusive) around `first..last` whose text occurs once in `source`."""
    lo, hi = first, last
    while True:
        if source.count("".join(lines[lo:hi + 1])) == 1:
            return lo, hi
        if lo == 0 and hi == len(lines) - 1:
            return None
        lo, hi = max(0, lo - 1), min(len(lines) - 1, hi + 1)


def _edit(path: str, source: str, first: int, last: int, new_lines: list[str], reason: str) -> EditCall | None:
    """Replace lines `first..last` (0-based) by `new_lines`, as an edit_file call with a unique old_text."""
    lines = source.splitlines(keepends=True)
    span = _unique_snippet(lines, first, last, source)
    if span is None:
        return None
    lo, hi = span
    old = "".join(lines[lo:hi + 1])
    new = "".join(lines[lo:first]) + "".join(new_lines) + "".join(lines[last + 1:hi + 1])
    return EditCall(path=path, old_text=old, new_text=new, reason=reason)


def _node_at(tree: ast.AST, line: int, kind: type[ast.AST], col: int | None = None) -> ast.AST | None:
    """The outermost `kind` node starting at `line` (and `col`, when given)."""
    return next((n for n in ast.walk(tree) if isinstance(n, kind) and getattr(n, "lineno", None) == line
                 and (col is None or getattr(n, "col_offset", None) == col)), None)


def _tape_reset(f: Finding, source: str, tree: ast.Module) -> EditCall | None:
    w = _node_at(tree, f.line, ast.With)
    if not isinstance(w, ast.With) or len(w.items) != 1 or w.items[0].optional_vars is not None:
        return None  # `with wp.Tape() as t:` makes a fresh tape: its hit is not the reused-tape shape
    tape = w.items[0].context_expr
    if not isinstance(tape, ast.Name | ast.Attribute):
        return None
    lines = source.splitlines(keepends=True)
    indent = lines[w.lineno - 1][: w.col_offset]
    first = w.lineno - 1
    return _edit(f.path, source, first, first, [f"{indent}{ast.unparse(tape)}.reset()\n", lines[first]],
                 "WG003: reset the reused tape each iteration so gradients and old launches do not accumulate")


def _requires_grad(f: Finding, source: str, tree: ast.Module) -> EditCall | None:
    call = _node_at(tree, f.line, ast.Call, f.col) or _node_at(tree, f.line, ast.Call)
    if not isinstance(call, ast.Call) or any(k.arg is None for k in call.keywords) or call.end_lineno is None \
            or call.end_col_offset is None:
        return None
    lines = source.splitlines(keepends=True)
    given = next((k for k in call.keywords if k.arg == "requires_grad"), None)
    if given is not None:  # `requires_grad=False` written out: the value is what changes
        v = given.value
        if not (isinstance(v, ast.Constant) and v.value is False and v.lineno == v.end_lineno):
            return None
        row = lines[v.lineno - 1]
        if not row.isascii():
            return None  # ast columns count UTF-8 bytes: only an ASCII line slices by them exactly
        patched_row = row[:v.col_offset] + "True" + row[v.end_col_offset:]
        return _edit(f.path, source, v.lineno - 1, v.lineno - 1, [patched_row],
                     "WG001: the array needs requires_grad=True for its gradient")
    if SourceModule(Path(f.path), f.path, source, tree).wp_call(call, ALLOCATORS | LIKE_ALLOCATORS) is None:
        # A project helper that allocates (`y = scratch(n)`): a new keyword would go to the helper, which need not
        # take it (a TypeError), and the repair inside it changes every caller. That is the user's call.
        return None
    first, last = call.lineno - 1, call.end_lineno - 1
    end = lines[last]
    if not end.isascii():
        return None  # ast columns count UTF-8 bytes: only an ASCII line slices by them exactly
    close = call.end_col_offset - 1  # the closing parenthesis
    if end[close:close + 1] != ")":
        return None
    sep = "" if not (call.args or call.keywords) else ", "
    patched = end[:close].rstrip() + f"{sep}requires_grad=True" + end[close:]
    new = [*lines[first:last], patched]
    return _edit(f.path, source, first, last, new, "WG001: the array needs requires_grad=True for its gradient")


_REPAIRS = {"WG003": _tape_reset, "WG001": _requires_grad}


def ready_fix(finding: Finding, workspace: Path) -> ReadyFix | None:
    """The one-call repair of `finding`, or None when its rule has none or the source is not of its shape."""
    repair = _REPAIRS.get(finding.code)
    if repair is None:
        return None
    try:
        source = (Path(workspace) / finding.path).read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    edit = repair(finding, source, tree)
    return None if edit is None else ReadyFix(rule=finding.code, arguments=edit)


def _site(f: Finding) -> str:
    return f"{f.code} {f.name} at {f.path}:{f.line}"


def mark_partial(repaired: list[tuple[Finding, ReadyFix]], causes: list[Finding]) -> None:
    """Set each fix's `leaves`: the rule hits among `causes` (those backing a ranked hypothesis) that break
    gradients whenever reached (severity error, not a low-confidence match) and are not the hit it repairs.
    A hit that has a ready fix of its own is listed too: this edit alone does not apply it."""
    serious = {_site(f): f for f in causes if f.severity == "error" and f.confidence != "low"}
    for hit, fix in repaired:
        fix.leaves = [site for site in serious if site != _site(hit)]
