"""The skill as a prompt: render `skill/SKILL.md` (a jinja2 template) and serve the reference files.

Rendering is deterministic for the same inputs (tool list, descriptions, Warp version), so the
system prompt is byte-identical across sessions and prompt caching hits. This module never imports
warp: the installed version is read from package metadata. The tool list comes from the registry
(`known_tools`), never from a list kept here.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

SKILL_NAME = "warp-debug-gradients"
# The Warp release the numbers quoted in SKILL.md and references/ were measured on (the test suite
# re-measures them on whatever Warp is installed and fails on any that went stale).
MEASURED_WARP = "1.19.0"

@dataclass(frozen=True)
class VersionCaveat:
    """A behaviour of Warp versions below `below` that changes how gradients are debugged."""

    below: tuple[int, int]
    text: str


# Each was measured (copy adjoint, restore_inputs: Warp 1.16.0 vs 1.19.0 in tests/test_skill_references.py)
# or comes from Warp's changelog (marked so in references/quick-checks.md).
VERSION_CAVEATS: tuple[VersionCaveat, ...] = (
    VersionCaveat(
        (1, 17),
        "The adjoint of a recorded `wp.copy`/`wp.clone`/`assign` overwrites the source's gradient instead "
        "of accumulating into it: when the source has another reader, gradients come out wrong or zero "
        "(measured on 1.16.0: 6 instead of 8, 0 instead of 6; quick-checks §1.3).",
    ),
    VersionCaveat(
        (1, 17),
        "`warp.autograd.gradcheck` has no `restore_inputs`: a forward that mutates its inputs is "
        "differenced from a mutated state. Use the hand-written harness (verification.md §2).",
    ),
    VersionCaveat(
        (1, 17),
        "`gradcheck_tape` and `jacobian` honour only the kernel-level `enable_backward=False`, not the "
        "module-level option.",
    ),
    VersionCaveat(
        (1, 17),
        "Tracker warnings for `wp.copy` do not name the call site; `backward()` does not clear the read "
        "flags and `reset()` clears them only for arrays that received gradients, so arrays reused "
        "across iterations can raise false alarms (verification.md §1).",
    ),
    VersionCaveat(
        (1, 13),
        "No store-adjoint consumption: a launch recorded twice doubles the gradient even without "
        "`retain_grad`, and every write of an element passes gradient (quick-checks §7).",
    ),
)


def installed_warp_version() -> str | None:
    """The installed warp-lang version from package metadata, or None when it is not installed."""
    try:
        return importlib.metadata.version("warp-lang")
    except importlib.metadata.PackageNotFoundError:
        return None


def parse_version(version: str) -> tuple[int, int] | None:
    """`"1.16.0"`, `"1.17.0.dev4"`, `"1.12.1+cu12"` -> (major, minor); None when unparseable."""
    m = re.match(r"\s*(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def version_caveats(warp_version: str | None) -> list[str]:
    """The caveats that apply to `warp_version`; every caveat, labelled by version, when it is unknown."""
    parsed = parse_version(warp_version) if warp_version else None
    if parsed is None:
        return [f"Warp < {c.below[0]}.{c.below[1]}: {c.text}" for c in VERSION_CAVEATS]
    return [c.text for c in VERSION_CAVEATS if parsed < c.below]


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring's first paragraph, its line breaks joined."""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    m = re.match(r"(.+?[.!?])(\s|$)", para)
    return m.group(1) if m else para


def tool_summaries(specs: Mapping[str, Any]) -> dict[str, str]:
    """The first sentence of each tool's docstring (`{name: ToolSpec}`, e.g. from `load_tools()`)."""
    return {name: first_sentence(spec.description) for name, spec in specs.items()}


def known_tools() -> dict[str, str]:
    """Every registered warpgrad tool, in registry order, with its summary: the tools are declared once, by
    their `@tool` decorator, and this list is read from there."""
    from ..tools.registry import load_tools

    return tool_summaries(load_tools())


def _tool_lines(tools: Sequence[str] | None, descriptions: Mapping[str, str] | None) -> list[dict[str, str]]:
    known = known_tools()
    names = list(known) if tools is None else list(tools)
    descriptions = descriptions or {}
    lines = []
    for name in names:
        summary = descriptions.get(name) or known.get(name) or "(no description available)"
        lines.append({"name": name, "summary": summary})
    return lines


def _package_text(*parts: str) -> str:
    return importlib.resources.files("warpgrad").joinpath(*parts).read_text(encoding="utf-8")


def _split_frontmatter(text: str) -> tuple[str, str]:
    """Split '---\\n<yaml>\\n---\\n<body>' into (frontmatter block with fences, body)."""
    m = re.match(r"---\n.*?\n---\n", text, flags=re.DOTALL)
    if not m:
        raise ValueError("SKILL.md must start with a '---' fenced frontmatter block")
    return m.group(0), text[m.end() :]


def _render(
    *,
    standalone: bool,
    tools: Sequence[str] | None,
    descriptions: Mapping[str, str] | None,
    warp_version: str | None,
) -> str:
    version = warp_version or installed_warp_version()
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    template = env.from_string(_package_text("skill", "SKILL.md"))
    text = template.render(
        standalone=standalone,
        warp_version=version or "unknown",
        measured_version=MEASURED_WARP,
        # A standalone skill meets Warp versions we cannot know in advance: list every caveat by version.
        caveats=version_caveats(None if standalone else version),
        tools=_tool_lines(tools, descriptions),
    )
    # Collapse runs of blank lines left by template tags, so the output does not depend on tag layout.
    return re.sub(r"\n{3,}", "\n\n", text)


def render_skill(
    tools: list[str] | None = None,
    warp_version: str | None = None,
    descriptions: Mapping[str, str] | None = None,
) -> str:
    """Render the SKILL.md body (no frontmatter) for the system prompt.

    Args:
        tools: Tool names available in the session, in the order to list them; None lists every warpgrad
            tool.
        warp_version: The Warp version the tools run; None reads the installed warp-lang version.
        descriptions: `{tool name: one-line summary}`, e.g. `tool_summaries(load_tools())`; tools missing
            from it fall back to built-in summaries.

    Returns:
        Markdown text, identical for identical arguments.
    """
    text = _render(standalone=False, tools=tools, descriptions=descriptions, warp_version=warp_version)
    return _split_frontmatter(text)[1].lstrip("\n")


def render_standalone_skill(warp_version: str | None = None) -> str:
    """Render the complete SKILL.md (frontmatter included) for use outside warpgrad, e.g. Claude Code.

    Every version caveat is listed with the version it applies to, and the tool list describes the
    optional warpgrad tools.
    """
    return _render(standalone=True, tools=None, descriptions=None, warp_version=warp_version)


def reference_names() -> list[str]:
    """File names of the reference documents (e.g. `quick-checks.md`), sorted."""
    root = importlib.resources.files("warpgrad").joinpath("references")
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".md"))


def read_reference(name: str) -> str:
    """Text of one reference document; `name` may omit the `.md` suffix.

    Raises:
        KeyError: `name` is not one of `reference_names()` (paths are never resolved).
    """
    file = name if name.endswith(".md") else f"{name}.md"
    if file not in reference_names():
        raise KeyError(f"no reference named {name!r}; available: {', '.join(reference_names())}")
    return _package_text("references", file)


def export_skill(directory: Path, warp_version: str | None = None) -> Path:
    """Write a standard Agent Skills folder `directory/warp-debug-gradients/` and return its path.

    It contains the rendered standalone `SKILL.md` and `references/*.md`, loadable as is by Agent
    Skills hosts. Existing files of the same names are overwritten; nothing else is touched.
    """
    skill_dir = Path(directory) / SKILL_NAME
    (skill_dir / "references").mkdir(parents=True, exist_ok=True)
    (skill_dir / "SKILL.md").write_text(render_standalone_skill(warp_version), encoding="utf-8")
    for name in reference_names():
        (skill_dir / "references" / name).write_text(read_reference(name), encoding="utf-8")
    return skill_dir
