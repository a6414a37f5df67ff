"""Rule and Finding: what a quick-check rule is and what it reports.

A rule is a class with a ruff-style docstring (fixed `##` sections) and a `check` method that yields
Findings for one parsed module of the user's project. Rules register themselves in `RULES` with the
`@register` decorator; `warpgrad.tools.quickchecks/__init__.py` imports every rule module, in code order.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import BaseModel, Field

from ..signatures import Signature

if TYPE_CHECKING:
    from .source import Project, SourceModule

Severity = Literal["error", "warning", "info"]
Confidence = Literal["high", "medium", "low"]

DOC_SECTIONS = (
    "## What it does",
    "## Why is this bad?",
    "## Signature",
    "## Known problems",
    "## Example",
    "Use instead:",
    "## References",
)

# The reference sections rules may cite (the brief's table); tests check every rule against this list.
REFERENCE_SECTIONS = (
    "references/quick-checks.md §1",
    "references/quick-checks.md §2",
    "references/quick-checks.md §3",
    "references/quick-checks.md §4",
    "references/quick-checks.md §5",
    "references/quick-checks.md §6a",
    "references/quick-checks.md §6b",
    "references/quick-checks.md §7",
    "references/quick-checks.md §8",
    "references/quick-checks.md §9a",
    "references/quick-checks.md §9b",
    "references/quick-checks.md §9c",
    "references/custom-gradients.md §2",
    "references/custom-gradients.md §3",
)


class Finding(BaseModel):
    """One place in the user's source that matches a known gradient-bug pattern.

    A finding is a location and a reason, never a verdict: the finite-difference signature decides which
    findings are plausible causes and which are incidental smells.
    """

    code: str = Field(description="Rule id, e.g. WG001.")
    name: str = Field(description="Rule name, e.g. missing-requires-grad.")
    path: str = Field(description="Workspace-relative path of the file (POSIX separators).")
    line: int = Field(description="1-based line of the flagged code.")
    col: int = Field(description="0-based column of the flagged code.")
    message: str = Field(description="What was found, why it can break gradients, and what to check next.")
    reference: str = Field(description="The references/*.md section that documents the pattern.")
    signatures: list[Signature] = Field(description="FD signatures this pattern produces (ranks the finding).")
    severity: Severity = Field(
        description="error: breaks gradients whenever reached; warning: can; info: smell."
    )
    confidence: Confidence = Field(
        description="How sure the static match is that the pattern is really there."
    )


RULES: dict[str, Rule] = {}


class Rule:
    """Base class of a quick-check rule. Subclasses set the class attributes and implement `check`."""

    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    reference: ClassVar[str]
    docs_section: ClassVar[str]
    """Name of the section in Warp's documentation that covers the pattern."""
    signatures: ClassVar[tuple[Signature, ...]]
    severity: ClassVar[Severity] = "warning"
    confidence: ClassVar[Confidence] = "medium"

    def check(self, module: SourceModule, project: Project) -> Iterator[Finding]:
        """Yield the findings of this rule in `module` (the project gives cross-file context)."""
        raise NotImplementedError

    def finding(
        self,
        module: SourceModule,
        node: ast.AST,
        detail: str = "",
        *,
        confidence: Confidence | None = None,
        severity: Severity | None = None,
    ) -> Finding:
        """Build a Finding at `node`; `detail` is the specific what/why/next-check for this match."""
        message = f"{self.message}: {detail}" if detail else self.message
        return Finding(
            code=self.code,
            name=self.name,
            path=module.rel,
            line=getattr(node, "lineno", 1),
            col=getattr(node, "col_offset", 0),
            message=message,
            reference=self.reference,
            signatures=list(self.signatures),
            severity=severity or self.severity,
            confidence=confidence or self.confidence,
        )

    @classmethod
    def doc_sections(cls) -> dict[str, str]:
        """The docstring split into its `##` sections (plus "Use instead:"), keyed by heading."""
        doc = cls.__doc__ or ""
        parts: dict[str, str] = {}
        heads = list(re.finditer(r"^\s*(## [^\n]+|Use instead:)\s*$", doc, re.MULTILINE))
        for i, m in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(doc)
            parts[m.group(1).strip()] = doc[m.end() : end].strip()
        return parts


def register(cls: type[Rule]) -> type[Rule]:
    """Class decorator: add one instance of the rule to `RULES` (the code is the key)."""
    if cls.code in RULES and type(RULES[cls.code]) is not cls:
        raise ValueError(f"rule code {cls.code} registered twice")
    RULES[cls.code] = cls()
    return cls
