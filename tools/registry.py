"""The one place tools are declared: the Anthropic tool list, the MCP server, chat and the CLI all read `TOOLS`.

A tool is a plain function `fn(args, workspace) -> Result` with a pydantic input model and a pydantic
output model, registered by the `@tool` decorator where it is defined; nothing else lists it. Its
docstring's first paragraph is what the model reads. Every module of `tools/` that applies the
decorator is found by `load_tools` (a text scan, so modules without tools are not imported for it).

Every tool answers in two sizes: its default answer fits one screen (`render`, or the compacted record,
under `budget` characters; `tools/budget.py`), and `detail="full"` returns the whole record. The
`detail` argument is added to every tool's input schema here, not to each input model. The structured
form (MCP structured content) is held to the same budget (`structured`), and the output schema is relaxed
to accept a fitted record.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from .budget import (
    DETAIL_DESCRIPTION,
    SCREEN,
    Detail,
    Renderer,
    compact_json,
    fit,
    fit_structured,
    relax_schema,
)


class ToolError(Exception):
    """A tool refused or failed in a way the caller should read and act on (becomes `is_error`)."""


class ToolTimeout(ToolError):
    """A tool call ran past its time limit and was killed (with everything it started)."""


class ToolCancelled(ToolError):
    """The caller gave up on a tool call (the client cancelled it); it was killed."""


class ToolCrashed(ToolError):
    """The process running a tool call died without an answer (a signal, or it exited)."""


DETAIL = "detail"


def split_detail(raw: dict[str, Any]) -> tuple[dict[str, Any], Detail]:
    """(the tool's own arguments, the answer size asked for) from a call's raw arguments.

    Raises:
        ToolError: `detail` is neither "summary" nor "full".
    """
    rest = {k: v for k, v in raw.items() if k != DETAIL}
    detail = raw.get(DETAIL, "summary")
    if detail not in ("summary", "full"):
        raise ToolError(f'detail must be "summary" or "full" (got {detail!r})')
    return rest, detail


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    args: type[BaseModel]
    result: type[BaseModel]
    run: Callable[[Any, Path], BaseModel]
    read_only: bool = True
    """False when the tool changes files in the workspace (MCP `destructive`/not read-only)."""
    long_running: bool = False
    """True for tools that run user code for seconds to minutes (progress display, notifications)."""
    render: Renderer | None = None
    """The one-screen text of a result; None: the result compacted (`budget.compact_json`)."""
    budget: int = SCREEN
    """Characters the default answer may take."""

    def anthropic_param(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema()}

    def input_schema(self) -> dict[str, Any]:
        schema = self.args.model_json_schema()
        props = schema.setdefault("properties", {})
        if DETAIL not in props:
            props[DETAIL] = {"type": "string", "enum": ["summary", "full"], "default": "summary",
                             "description": DETAIL_DESCRIPTION, "title": "Detail"}
        return schema

    def output_schema(self) -> dict[str, Any]:
        """The result model's schema, relaxed so a fitted record validates (`budget.relax_schema`)."""
        return relax_schema(self.result.model_json_schema())

    def call(self, raw: dict[str, Any] | BaseModel, workspace: Path) -> BaseModel:
        """Validate `raw` against the input model and run the tool (raises ValidationError / ToolError).

        A `detail` key is accepted and ignored here: it sizes the answer (`answer`), not the work."""
        if not isinstance(raw, self.args):
            raw = self.args.model_validate(split_detail(raw)[0] if isinstance(raw, dict) else raw)
        return self.run(raw, Path(workspace))

    def summary(self, result: BaseModel) -> str:
        """The default answer: the tool's rendering (or the compacted record) within its budget."""
        text = self.render(result) if self.render is not None else compact_json(result, self.budget - 80)
        return fit(text, self.budget)

    def structured(self, data: dict[str, Any], detail: Detail) -> dict[str, Any]:
        """The structured twin of `answer` (MCP structured content): the record's JSON data fitted to the
        budget, or whole with `detail="full"`."""
        return data if detail == "full" else fit_structured(data, self.budget)

    def answer(self, result: BaseModel, detail: Detail) -> str:
        """The text a caller reads: the summary, or the whole record as JSON."""
        return result.model_dump_json() if detail == "full" else self.summary(result)


TOOLS: dict[str, ToolSpec] = {}

# The decorator hands back the function itself, so callers keep its precise signature and result type.
ToolFn = TypeVar("ToolFn", bound=Callable[..., BaseModel])


def tool(
    *, args: type[BaseModel], result: type[BaseModel], name: str | None = None, read_only: bool = True,
    long_running: bool = False, render: Renderer | None = None, budget: int = SCREEN,
) -> Callable[[ToolFn], ToolFn]:
    """Register `fn` as a tool. The name defaults to the function name."""

    def register(fn: ToolFn) -> ToolFn:
        doc = inspect.getdoc(fn)
        if not doc:
            raise TypeError(f"tool {fn.__name__} needs a docstring: it is what the model reads")
        spec = ToolSpec(name or fn.__name__, doc, args, result, fn, read_only, long_running, render, budget)
        if spec.name in TOOLS and TOOLS[spec.name].run is not fn:
            raise ValueError(f"tool {spec.name!r} registered twice")
        TOOLS[spec.name] = spec
        return fn

    return register


def tool_modules() -> list[str]:
    """The modules of `tools/` that declare a tool (a line starting `@tool(`), sorted by module name.

    The order is the order the model sees the tools in; it depends only on the module names, so the
    rendered tool list stays byte-identical between sessions (prompt caching)."""
    root = Path(__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] == "harness" or path.name == "registry.py":
            continue  # the harness runs in the child process; the registry defines the decorator
        if "\n@tool(" in path.read_text(encoding="utf-8"):
            found.append(f"{__package__}." + ".".join(rel.with_suffix("").parts))
    return found


def load_tools() -> dict[str, ToolSpec]:
    """Import every tool module and return the registry, in `tool_modules` order and, within a module, in
    the order of definition (not import order, which depends on what the caller imported first)."""
    mods = tool_modules()
    for mod in mods:
        importlib.import_module(mod)
    rank = {m: i for i, m in enumerate(mods)}

    def key(spec: ToolSpec) -> tuple[int, int]:
        code = getattr(spec.run, "__code__", None)
        return rank.get(spec.run.__module__, len(rank)), code.co_firstlineno if code else 0

    ordered = sorted(TOOLS.values(), key=key)
    TOOLS.clear()
    TOOLS.update((s.name, s) for s in ordered)
    return TOOLS
