"""Run the quick-check rules over files: parse, build the project, apply rules, honour `# noqa`."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .base import RULES, Finding
from .source import SourceModule, build_project, parse_module

# Folders never scanned when a directory is given: our own state, VCS, caches and virtualenvs.
SKIP_DIRS = {
    ".warpgrad",
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    ".venv",
    "venv",
    "env",
    ".env",
    "node_modules",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "site-packages",
    "build",
    "dist",
}


@dataclass
class ParseError:
    path: str
    message: str


@dataclass
class CheckReport:
    findings: list[Finding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    """Workspace-relative paths of the files that were parsed and checked."""
    errors: list[ParseError] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)


def _is_venv(path: Path) -> bool:
    return (path / "pyvenv.cfg").exists()


def collect_files(paths: Iterable[Path]) -> list[Path]:
    """Python files under `paths` (files kept as given; folders walked, skipping virtualenvs and caches)."""
    out: list[Path] = []
    for p in paths:
        if p.is_file():
            out.append(p)
            continue
        for dirpath, dirnames, filenames in os.walk(p):
            d = Path(dirpath)
            dirnames[:] = sorted(n for n in dirnames if n not in SKIP_DIRS and not _is_venv(d / n))
            out.extend(d / f for f in sorted(filenames) if f.endswith(".py"))
    seen: set[Path] = set()
    unique = []
    for f in out:
        r = f.resolve()
        if r not in seen:
            seen.add(r)
            unique.append(f)
    return unique


def check_files(
    files: list[Path], root: Path, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None
) -> CheckReport:
    """Parse `files` (never importing them) and run the selected rules; parse failures are reported per file."""
    report = CheckReport()
    codes = [c for c in sorted(RULES) if (not select or c in set(select)) and c not in set(ignore or ())]
    report.rules = codes
    modules: list[SourceModule] = []
    for f in files:
        try:
            modules.append(parse_module(f, root))
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError) as e:
            rel = _rel(f, root)
            detail = f"line {e.lineno}: {e.msg}" if isinstance(e, SyntaxError) else str(e)
            report.errors.append(ParseError(rel, f"{type(e).__name__}: {detail}"))
    report.files = [m.rel for m in modules]
    project = build_project(modules)
    seen: set[tuple] = set()
    for m in modules:
        for code in codes:
            try:
                found = list(RULES[code].check(m, project))
            except RecursionError as e:  # pathological nesting in user code: report, keep checking
                report.errors.append(ParseError(m.rel, f"{code} could not analyse this file: {e}"))
                continue
            for finding in found:
                noqa = m.noqa.get(finding.line, set())
                if noqa is None or finding.code in noqa:
                    continue
                key = (finding.code, finding.path, finding.line, finding.col)
                if key not in seen:
                    seen.add(key)
                    report.findings.append(finding)
    report.findings.sort(key=lambda f: (f.path, f.line, f.col, f.code))
    return report


def run_rules(files: list[Path], root: Path) -> list[Finding]:
    """Findings of every rule over `files`; paths in findings are relative to `root`. Unparsable files are skipped."""
    return check_files(files, root).findings


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()
