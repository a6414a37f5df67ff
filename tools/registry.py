"""The one place tools are declared: the Anthropic tool list, the MCP server, chat and the CLI all read `TOOLS`.

A tool is a plain function `fn(args, workspace) -> Result` with a pydantic input model and a pydantic
output model, registered by the `@tool` decorator where it is defined; nothing else lists it. Its
docstring's first paragraph is what the model reads. Every module of `tools/` that applies the
decorator is found by `load_tools` (a text scan, so modules without tools are not imported for it).

The declaration says everything a front end needs: whether the tool changes files (MCP annotations), runs
user code for long (progress), forks its runs from a warm worker (`forks`: the CLI and the MCP server boot
one for it), asks a person first in chat (`confirm`), and whether it is a top-level command of its own
(`cli`, a `CliCommand`: `warpgrad gradcheck`, `warpgrad run`; every tool is `warpgrad tool NAME` anyway).
A top-level command's name and help are read from the decorator's source (`declared_commands`), so
`warpgrad --help` lists them without importing the tools.

Every tool answers in two sizes: its default answer fits one screen (`render`, or the compacted record,
under `budget` characters; `tools/budget.py`), and `detail="full"` returns the whole record. The
`detail` argument is added to every tool's input schema here, not to each input model. The structured
form (MCP structured content) is held to the same budget (`structured`), and the output schema is relaxed
to accept a fitted record.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
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
class CliCommand:
    """A tool's own top-level command (`warpgrad NAME SCRIPT [--option ...] [-- ARGS]`).

    Its options are the input model's fields (`--field-name`, the field's description as help), so nothing
    about them is written here but what a command line needs besides: the positional field, option names
    kept from before (`rename`), the fields that are paths (made workspace-relative), the exit status, and
    how a person sees the result. `name` and `help` must be literals: `declared_commands` reads them from
    the source without importing the tool.
    """

    name: str
    help: str
    positional: str = "script"
    """The field given as the positional argument (a workspace-relative path)."""
    rename: dict[str, str] = field(default_factory=dict, hash=False)  # a spec stays hashable, as before
    """`{field: option name}` where the option's name is not the field's (`timeout_s` -> `--timeout`)."""
    paths: tuple[str, ...] = ()
    """Further fields that are paths: given relative to the current folder, passed workspace-relative."""
    exit_code: Callable[[Any], int] | None = None
    """The exit status for a result (None: 0); a refusal (`ToolError`) or bad arguments exit 2."""
    render: str | None = None
    """`module:function` that prints the result for a person (None: the tool's one-screen summary)."""
    status: str | None = None
    """What a terminal shows while the tool runs (with its progress); None shows nothing."""
    budgeted_json: bool = False
    """`--json` prints the record fitted like a model's answer (`budget.compact_json`: repeats collapsed, long
    lists capped with a count) and `--detail full` the whole record; False: `--json` is the whole record."""
    outputs: tuple[FileOutput, ...] = ()
    """Further files the command can write from the result (`--md PATH`, `--html PATH`)."""


@dataclass(frozen=True)
class FileOutput:
    """A file a tool's command writes from its result when given `--OPTION PATH` (a report for people)."""

    option: str
    help: str
    writer: str
    """`module:function` called with (result, path)."""


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
    forks: bool = False
    """Its runs of user code fork from a warm worker (`tools/worker.py`): the CLI opens one around the call
    and the MCP server boots its shared one before the call (other tools do not pay for it)."""
    confirm: bool = False
    """It changes the user's program: `warpgrad chat` shows the change and asks the person first."""
    cli: CliCommand | None = None
    """Its own top-level CLI command, if any."""

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
    long_running: bool = False, render: Renderer | None = None, budget: int = SCREEN, forks: bool = False,
    confirm: bool = False, cli: CliCommand | None = None,
) -> Callable[[ToolFn], ToolFn]:
    """Register `fn` as a tool (the fields are `ToolSpec`'s). The name defaults to the function name."""

    def register(fn: ToolFn) -> ToolFn:
        doc = inspect.getdoc(fn)
        if not doc:
            raise TypeError(f"tool {fn.__name__} needs a docstring: it is what the model reads")
        if cli is not None:
            unknown = ({cli.positional, *cli.paths, *cli.rename} - set(args.model_fields))
            if unknown:
                raise TypeError(f"tool {fn.__name__}: the CLI names fields {args.__name__} lacks: {sorted(unknown)}")
        spec = ToolSpec(name or fn.__name__, doc, args, result, fn, read_only, long_running, render, budget,
                        forks, confirm, cli)
        if spec.name in TOOLS and TOOLS[spec.name].run is not fn:
            raise ValueError(f"tool {spec.name!r} registered twice")
        TOOLS[spec.name] = spec
        return fn

    return register


def _tool_sources() -> dict[str, str]:
    """`{module: source}` of the modules of `tools/` that declare a tool (a line starting `@tool(`), sorted by
    module name."""
    root = Path(__file__).parent
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] == "harness" or path.name == "registry.py":
            continue  # the harness runs in the child process; the registry defines the decorator
        text = path.read_text(encoding="utf-8")
        if "\n@tool(" in text:
            found[f"{__package__}." + ".".join(rel.with_suffix("").parts)] = text
    return found


def tool_modules() -> list[str]:
    """The modules of `tools/` that declare a tool, sorted by module name.

    The order is the order the model sees the tools in; it depends only on the module names, so the
    rendered tool list stays byte-identical between sessions (prompt caching)."""
    return list(_tool_sources())


@dataclass(frozen=True)
class DeclaredCommand:
    """A top-level CLI command as its tool's source declares it, read without importing the tool."""

    name: str
    help: str
    module: str
    """The tool's module: importing it registers the tool whose `cli.name` is `name`."""
    forks: bool = False
    """The decorator's `forks=True`: the command can boot its warm worker before it imports the tool."""


def declared_commands() -> list[DeclaredCommand]:
    """Every `cli=CliCommand(name=..., help=...)` of a `@tool` decorator in `tools/`, in `tool_modules` order.

    Read from the source (each decorator's text alone is parsed) because importing the tools costs about a
    second that `warpgrad --help` and every other command should not pay.

    Raises:
        TypeError: a `CliCommand` whose name or help is not a literal, or two tools declaring one command.
    """
    found: list[DeclaredCommand] = []
    for module, text in _tool_sources().items():
        for call in _tool_decorators(text):
            cli = next((k.value for k in call.keywords if k.arg == "cli"), None)
            if not isinstance(cli, ast.Call):
                continue
            given = {k.arg: k.value for k in cli.keywords}
            try:
                name, help_ = (ast.literal_eval(given[k]) for k in ("name", "help"))
            except (KeyError, ValueError) as e:
                raise TypeError(f"{module}: CliCommand needs literal name= and help= keywords") from e
            twice = next((d for d in found if d.name == name), None)
            if twice is not None:
                raise TypeError(f"{module} and {twice.module} both declare the command {name!r}")
            forks = any(k.arg == "forks" and isinstance(k.value, ast.Constant) and k.value.value is True
                        for k in call.keywords)
            found.append(DeclaredCommand(name, help_, module, forks))
    return found


def _tool_decorators(text: str) -> list[ast.Call]:
    """The `@tool(...)` calls in a module's source: each from its `@tool(` line to the line before its `def`."""
    lines = text.splitlines()
    calls = []
    for i, line in enumerate(lines):
        if not line.startswith("@tool("):
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith(("def ", "@"))), len(lines))
        expr = ast.parse("\n".join(lines[i:end])[1:], mode="eval").body
        if isinstance(expr, ast.Call):
            calls.append(expr)
    return calls


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
