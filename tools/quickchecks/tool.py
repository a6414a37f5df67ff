"""The `quick_checks` tool: run the static gradient-bug rules over workspace files."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from ..registry import ToolError, tool
from .base import RULES, Finding
from .engine import check_files, collect_files


class QuickChecksArgs(BaseModel):
    paths: list[str] = Field(
        default_factory=list,
        description=(
            "Workspace-relative files or folders to check. Empty means the whole workspace (every .py file, "
            "skipping .warpgrad/, virtualenvs and caches)."
        ),
    )
    select: list[str] = Field(
        default_factory=list,
        description=("Rule codes to run (e.g. ['WG001', 'WG006']). Empty means all rules."),
    )
    ignore: list[str] = Field(default_factory=list, description="Rule codes to skip.")


class ParseFailure(BaseModel):
    path: str = Field(description="Workspace-relative path of the file that could not be parsed.")
    message: str = Field(description="The parser's error (the file was skipped; other files were checked).")


class QuickChecksResult(BaseModel):
    findings: list[Finding] = Field(
        description="Matches, sorted by path and line. Each is a lead, not a verdict."
    )
    files_scanned: list[str] = Field(description="Workspace-relative paths of the files that were checked.")
    rules_run: list[str] = Field(description="Codes of the rules that ran.")
    parse_errors: list[ParseFailure] = Field(description="Files that could not be parsed, with the reason.")


def _resolve(workspace: Path, raw: str) -> Path:
    root = workspace.resolve()
    path = (root / raw).resolve()
    if path != root and root not in path.parents:
        raise ToolError(
            f"{raw!r} is outside the workspace {root}; pass a path relative to the workspace root."
        )
    if not path.exists():
        raise ToolError(f"{raw!r} does not exist in the workspace; use workspace_overview to list files.")
    return path


@tool(args=QuickChecksArgs, result=QuickChecksResult, read_only=True)
def quick_checks(args: QuickChecksArgs, workspace: Path) -> QuickChecksResult:
    """Scan the program's source for known Warp gradient-bug patterns (rules WG001-WG019) without running it.

    Static analysis only: files are parsed, never imported or executed. Each finding gives a rule code, a
    location, what was matched and why it can break gradients, the gradient signature it produces and the
    references/*.md section to read. Findings are leads: rank them with the finite-difference signature
    (gradcheck) before patching anything; a clean scan does not mean the gradients are right.
    """
    unknown = sorted((set(args.select) | set(args.ignore)) - set(RULES))
    if unknown:
        raise ToolError(f"unknown rule code(s) {unknown}; valid codes are {list(RULES)}.")
    root = workspace.resolve()
    targets = [_resolve(workspace, p) for p in args.paths] or [root]
    # Links inside the workspace may point outside it: those files are not ours to read.
    files = [f for f in collect_files(targets) if root in f.resolve().parents]
    report = check_files(files, root, select=args.select or None, ignore=args.ignore)
    return QuickChecksResult(
        findings=report.findings,
        files_scanned=report.files,
        rules_run=report.rules,
        parse_errors=[ParseFailure(path=e.path, message=e.message) for e in report.errors],
    )
