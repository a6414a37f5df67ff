"""The one place tools are declared: the Anthropic tool list, the MCP server and the CLI all read `TOOLS`.

A tool is a plain function `fn(args, workspace) -> Result` with a pydantic input model and a pydantic
output model. Its docstring's first paragraph is what the model reads.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel


class ToolError(Exception):
    """A tool refused or failed in a way the caller should read and act on (becomes `is_error`)."""


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

    def anthropic_param(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema()}

    def input_schema(self) -> dict[str, Any]:
        return self.args.model_json_schema()

    def output_schema(self) -> dict[str, Any]:
        return self.result.model_json_schema()

    def call(self, raw: dict[str, Any] | BaseModel, workspace: Path) -> BaseModel:
        """Validate `raw` against the input model and run the tool (raises ValidationError / ToolError)."""
        args = raw if isinstance(raw, self.args) else self.args.model_validate(raw)
        return self.run(args, Path(workspace))


TOOLS: dict[str, ToolSpec] = {}

# Modules whose import registers tools. Order is the order the model sees them in.
TOOL_MODULES = [
    "warpgrad.tools.workspace",
    "warpgrad.tools.shrink",
    "warpgrad.tools.run_script",
    "warpgrad.tools.gradcheck",
    "warpgrad.tools.instrument",
    "warpgrad.tools.inspect_tape",
    "warpgrad.tools.quickchecks.tool",
    "warpgrad.tools.bisect",
    "warpgrad.tools.diagnose",
    "warpgrad.tools.finish",
]


def tool(
    *, args: type[BaseModel], result: type[BaseModel], name: str | None = None, read_only: bool = True,
    long_running: bool = False,
) -> Callable[[Callable[..., BaseModel]], Callable[..., BaseModel]]:
    """Register `fn` as a tool. The name defaults to the function name."""

    def register(fn: Callable[..., BaseModel]) -> Callable[..., BaseModel]:
        doc = inspect.getdoc(fn)
        if not doc:
            raise TypeError(f"tool {fn.__name__} needs a docstring: it is what the model reads")
        spec = ToolSpec(name or fn.__name__, doc, args, result, fn, read_only, long_running)
        if spec.name in TOOLS and TOOLS[spec.name].run is not fn:
            raise ValueError(f"tool {spec.name!r} registered twice")
        TOOLS[spec.name] = spec
        return fn

    return register


def load_tools() -> dict[str, ToolSpec]:
    """Import every tool module and return the registry."""
    for mod in TOOL_MODULES:
        importlib.import_module(mod)
    return TOOLS
