"""CLI commands of the core: each tool's own command (`warpgrad gradcheck`, `warpgrad run`: a `CliCommand` in its
declaration), and `warpgrad tool NAME` for every registered tool."""

from __future__ import annotations

import contextlib
import json
import types
import typing
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, overload

import click
import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from ..tools.gradcheck import GradcheckResult
    from ..tools.registry import DeclaredCommand, ToolSpec
    from ..tools.run_script import RunScriptResult

console = Console(stderr=True)
out = Console()


def workspace_for(script: Path | None, workspace: Path | None) -> Path:
    """The workspace is `--workspace`, else the current folder when it holds the script, else the script's folder."""
    if workspace is not None:
        return workspace.resolve()
    cwd = Path.cwd().resolve()
    if script is None:
        return cwd
    s = script.resolve()
    return cwd if s.is_relative_to(cwd) else s.parent


@contextlib.contextmanager
def warm_worker(ws: Path, device: str | None) -> Iterator[None]:
    """Route the command's harness runs through one warm worker, booting it now: it imports Python, numpy and
    Warp in its sandbox while this process imports the tools (import those inside the block)."""
    from ..tools.worker import worker_pool

    with worker_pool() as pool:
        if pool is not None:
            pool.prewarm(ws, device)
        yield


@overload
def rel_to(ws: Path, p: Path) -> str: ...
@overload
def rel_to(ws: Path, p: Path | None) -> str | None: ...
def rel_to(ws: Path, p: Path | None) -> str | None:
    """`p` as a workspace-relative POSIX path when it lies inside `ws`, else as given (None stays None)."""
    if p is None:
        return None
    rp = p.resolve()
    return rp.relative_to(ws).as_posix() if rp.is_relative_to(ws) else str(p)


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.6g}"


def render_gradcheck(r: GradcheckResult) -> None:
    colour = {True: "green", False: "red", None: "yellow"}[r.passed]
    verdict = {True: "gradients match finite differences", False: "GRADIENTS ARE WRONG", None: "no verdict"}[r.passed]
    out.print(f"[bold {colour}]{verdict}[/]  signature: [bold]{r.signature}[/]"
              + (f" (factor {r.factor:g})" if r.factor is not None else ""))
    if not r.ok:
        out.print(f"[red]check could not be made:[/] {r.reason}")
        if r.error and r.error.traceback:
            last = r.error.traceback[-1]
            out.print(f"  at {last.get('file')}:{last.get('line')}  {last.get('code') or ''}")
        return
    if r.explanation:
        out.print(r.explanation)
    if r.reason and r.reason != r.explanation:
        out.print(f"[yellow]{r.reason}[/]")
    out.print(f"objective: {r.objective} = {_fmt(r.objective_value)}")
    out.print(f"gradient:  {r.gradient}")
    if r.directions:
        t = Table(title=f"AD·v vs FD·v (step {r.eps:g}, noise band {_fmt(r.noise_band)})")
        for col in ("direction", "AD·v", "FD·v", "AD/FD", "band", "agree"):
            t.add_column(col)
        for c in r.directions:
            t.add_row(f"{c.direction} ({c.scope})", _fmt(c.ad), _fmt(c.fd), _fmt(c.ratio), _fmt(c.band),
                      "[green]yes[/]" if c.agree else "[red]no[/]")
        out.print(t)
    if r.params:
        t = Table(title="parameters")
        for col in ("name", "size", "|AD|", "NaN/inf", "consumed by", "AD/FD", "agree"):
            t.add_column(col)
        for p in r.params:
            t.add_row(p.name, str(p.size), _fmt(p.ad_norm), str(p.nonfinite), p.how or "", _fmt(p.ratio),
                      "—" if p.agree is None else ("[green]yes[/]" if p.agree else "[red]no[/]"))
        out.print(t)
    if r.elements:
        bad = [e for e in r.elements if not e.agree]
        out.print(f"elements checked: {len(r.elements)}, disagreeing: {len(bad)}"
                  + (f" (first: {bad[0].param}{bad[0].index} AD {bad[0].ad:.4g} FD {bad[0].fd:.4g})" if bad else ""))
    for n in r.notes:
        out.print(f"note: {n}")
    out.print(f"[dim]iteration {r.iteration}, {r.evaluations} evaluations, {r.wall_s:.1f} s, {r.device}, "
              f"Warp {r.warp_version}, harness {r.harness_id[:12]}[/]")


def render_run(r: RunScriptResult) -> None:
    status = "[green]ran[/]" if r.ok else "[red]failed[/]" + (f": {r.error.kind}: {r.error.message}" if r.error else "")
    out.print(f"{r.script}: {status} in {r.wall_s:.1f} s (Warp {r.warp_version}, {r.device})")
    if r.loss_trajectory:
        out.print(f"loss: {len(r.loss_trajectory)} points, first {r.loss_trajectory[0]:.6g}, last "
                  f"{r.loss_trajectory[-1]:.6g}, trend {r.trend}")
    if r.metric is not None:
        found = f"{len(r.metric_values)} values, last {r.metric_final!r}" if r.metric_values else "not printed"
        out.print(f"{r.metric.label()}: {found}")
    for w in r.warp_warnings[:10]:
        out.print(f"[yellow]Warp warning:[/] {w}")


def _call(target: str) -> Any:
    """The function a `module:function` string names."""
    import importlib

    mod, _, fn = target.partition(":")
    return getattr(importlib.import_module(mod), fn)


def run_command(spec: ToolSpec, ws: Path, raw: dict[str, Any], as_json: bool, detail: str = "summary",
                files: Mapping[str, Path] | None = None) -> int:
    """Run a tool as its own command: validate, run (its runs forked from a warm worker when it `forks`, the
    stage and progress on a terminal when it declares a `status`), write the files asked for (`files`:
    `{FileOutput.option: path}`), print, and return the exit status."""
    from ..tools import progress
    from ..tools.budget import compact_json

    cli = spec.cli
    if cli is None:
        raise TypeError(f"tool {spec.name} declares no command")
    # The runs fork from one warm worker instead of booting Python and Warp each. `ModelCommand.parse_args` boots
    # it before the tool's import where the command line names the script; otherwise it boots here.
    files = files or {}
    with warm_worker(ws, raw.get("device")) if spec.forks else contextlib.nullcontext():
        args = spec.args.model_validate(raw)
        if as_json or cli.status is None:
            result = spec.call(args, ws)
        else:
            # On a terminal only (console is stderr): each stage, and the FD evaluations done out of planned.
            with console.status(cli.status) as status, \
                    progress.reporting(status.update if console.is_terminal else None):
                result = spec.call(args, ws)
    for o in cli.outputs:
        path = files.get(o.option)
        if path is not None:
            _call(o.writer)(result, path)
    if as_json:
        print(compact_json(result) if cli.budgeted_json and detail != "full" else result.model_dump_json(indent=2))
    elif cli.render is None:
        out.print(spec.summary(result), highlight=False, markup=False)
    else:
        _call(cli.render)(result)
    return 0 if cli.exit_code is None else cli.exit_code(result)


class ModelCommand(click.Command):
    """A tool's own command (`ToolSpec.cli`): its options are the tool's input model's fields, written once,
    in the model, with their descriptions as help.

    The options are built when the command is parsed, not when the command tree is: importing a tool's
    module takes seconds that `warpgrad --help` and every other command should not pay (the name and help
    come from `registry.declared_commands`, read from the source). Plain strings stay strings (`--device`,
    `--metric-direction`): the model validates them and its error names the field. The positional argument
    and the paths are workspace-relative in the model; arguments after `--` are the script's (`args`).
    """

    def __init__(self, declared: DeclaredCommand) -> None:
        super().__init__(declared.name, help=declared.help, short_help=declared.help.split(".")[0],
                         context_settings={"allow_extra_args": True, "ignore_unknown_options": False})
        self.declared = declared
        self.built = False

    def spec(self) -> ToolSpec:
        """The tool that declares this command (its module imported now)."""
        import importlib

        from ..tools.registry import TOOLS

        importlib.import_module(self.declared.module)
        found = [s for s in TOOLS.values() if s.cli is not None and s.cli.name == self.name]
        if len(found) != 1:
            raise TypeError(f"{len(found)} tools declare the command {self.name!r} in {self.declared.module}")
        return found[0]

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # The options are built by importing the tool (about half a second). A tool whose runs fork from the warm
        # worker boots it first, so the worker's own boot (Python, numpy, Warp) overlaps that import, as the
        # hand-written commands did; the worker lives as long as the command's context.
        if self.declared.forks:
            early = _early_workspace(args)
            if early is not None:
                from .warm.client import start_at_exit

                start_at_exit()  # this command ran in its own process: the next ones need not (cli/warm)
                from ..tools.worker import worker_pool

                pool = ctx.with_resource(worker_pool())
                if pool is not None:
                    pool.prewarm(*early)
        return super().parse_args(ctx, args)

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if not self.built:
            self.params = self.model_params()
            self.built = True
        return super().get_params(ctx)

    def model_params(self) -> list[click.Parameter]:
        spec = self.spec()
        cli, fields = spec.cli, spec.args.model_fields
        assert cli is not None  # spec() found it by its command
        required = fields[cli.positional].is_required()
        params: list[click.Parameter] = [click.Argument([cli.positional], required=required)]
        # Plain strings for Literal fields: the model validates them and its error names the field.
        params += field_options(spec.args, skip={cli.positional, "args"}, rename=cli.rename, choices=False)
        params.append(click.Option(["--workspace"], type=click.Path(file_okay=False, path_type=Path), default=None,
                                   help="Workspace root (default: the current folder, or the script's)."))
        if cli.budgeted_json:
            params.append(click.Option(["--json", "as_json"], is_flag=True, help=(
                "Print one JSON document: every field, repeats collapsed with a count and long lists capped with "
                "a count (--detail full: all).")))
            params.append(click.Option(["--detail"], type=click.Choice(["summary", "full"]), default="summary",
                                       help="summary (default) or full: with --json, the whole record."))
        else:
            params.append(click.Option(["--json", "as_json"], is_flag=True, help="Print one JSON document."))
        for o in cli.outputs:
            params.append(click.Option([f"--{o.option}"], type=click.Path(dir_okay=False, path_type=Path),
                                       default=None, help=o.help))
        return params

    def invoke(self, ctx: click.Context) -> Any:
        from ..tools.registry import ToolError

        spec = self.spec()
        assert spec.cli is not None  # spec() found it by its command
        positional, paths = spec.cli.positional, set(spec.cli.paths)
        kw = dict(ctx.params)
        workspace, as_json, detail = kw.pop("workspace"), kw.pop("as_json"), kw.pop("detail", "summary")
        files = {o.option: kw.pop(o.option) for o in spec.cli.outputs}
        raw: dict[str, Any] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in kw.items()
                               if v is not None and v != ()}
        given = [Path(raw[k]) for k in (positional, *sorted(paths)) if k in raw]
        ws = workspace_for(given[0] if given else None, workspace)
        for k in {positional, *paths} & raw.keys():
            raw[k] = rel_to(ws, Path(raw[k]))
        raw["args"] = list(ctx.args)
        try:
            code = run_command(spec, ws, raw, as_json, detail, files)
        except (ToolError, ValidationError) as e:
            console.print(f"[red]error:[/] {e}")
            raise SystemExit(2) from None
        raise SystemExit(code)


def _early_workspace(args: list[str]) -> tuple[Path, str | None] | None:
    """(workspace, device) of a command line before its options are known: the first `.py` argument as the
    script, `--workspace` and `--device` as given; None for `--help` or when no script is named (the worker then
    boots on the first run, as before)."""
    own = args[:args.index("--")] if "--" in args else args
    if "--help" in own:
        return None

    def value(option: str) -> str | None:
        for i, a in enumerate(own):
            if a == option and i + 1 < len(own):
                return own[i + 1]
            if a.startswith(option + "="):
                return a.split("=", 1)[1]
        return None

    script = next((a for a in own if a.endswith(".py") and not a.startswith("-")), None)
    if script is None:
        return None
    workspace = value("--workspace")
    return workspace_for(Path(script), Path(workspace) if workspace else None), value("--device")


def click_commands() -> list[click.Command]:
    """The tools' own commands (`gradcheck`, `run`, ...): one per `CliCommand` a tool declares; none listed here."""
    from ..tools.registry import declared_commands

    return [ModelCommand(d) for d in declared_commands()]


# ---------------------------------------------------------------------------------------------- generated
def _click_type(annotation: Any) -> tuple[Any, bool]:
    """(click type, multiple) for a pydantic field annotation."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _click_type(inner[0]) if len(inner) == 1 else (str, False)
    if origin is list:
        return _click_type(typing.get_args(annotation)[0])[0], True
    if origin is typing.Literal:
        return click.Choice([str(a) for a in typing.get_args(annotation)]), False
    if annotation in (int, float, bool, str):
        return annotation, False
    return str, False  # nested models: pass JSON


def field_options(model: type[BaseModel], *, skip: Collection[str] = (), rename: Mapping[str, str] | None = None,
                  choices: bool = True) -> list[click.Parameter]:
    """One option per field of `model` (`--field-name`, or `--NAME` for `rename[field]`), the field's description
    as its help; booleans as `--x/--no-x`, lists repeatable, Literals as choices (`choices=False`: plain strings).
    Every option defaults to None: an option not given leaves the field to the model's default."""
    rename = rename or {}
    params: list[click.Parameter] = []
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        ctype, multiple = _click_type(field.annotation)
        opt = "--" + rename.get(name, name).replace("_", "-")
        if ctype is bool:
            params.append(click.Option([f"{opt}/--no-{opt[2:]}", name], default=None, help=field.description))
        else:
            plain = str if isinstance(ctype, click.Choice) and not choices else ctype
            params.append(click.Option([opt, name], type=plain, multiple=multiple, default=None,
                                       help=field.description))
    return params


def tool_command(spec: ToolSpec) -> click.Command:
    params = field_options(spec.args)
    params.append(click.Option(["--workspace"], type=click.Path(file_okay=False), default=".", help="Workspace root."))
    # Scripts parse this command's output: the whole record stays the default here (a model's default is the
    # one-screen summary, over MCP and chat).
    params.append(click.Option(["--detail"], type=click.Choice(["summary", "full"]), default="full",
                               help="full: the whole record as JSON (default); summary: the one-screen answer."))

    def callback(workspace: str, detail: str, **kwargs: Any) -> None:
        from ..tools.registry import ToolError

        raw = {k: v for k, v in kwargs.items() if v is not None and v != ()}
        for k, v in list(raw.items()):
            if isinstance(v, tuple):
                raw[k] = list(v)
        try:
            result: BaseModel = spec.call(raw, Path(workspace).resolve())
        except (ToolError, ValidationError) as e:
            click.echo(json.dumps({"error": str(e)}), err=True)
            raise SystemExit(2) from None
        click.echo(result.model_dump_json(indent=2) if detail == "full" else spec.summary(result))

    return click.Command(spec.name, params=params, callback=callback,
                         help=spec.description.split("\n\n")[0], short_help=spec.description.split(".")[0][:80])


class ToolGroup(click.Group):
    """`warpgrad tool NAME ...`: every registered tool, options generated from its pydantic input model."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from ..tools.registry import load_tools

        return sorted(load_tools())

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        from ..tools.registry import load_tools

        spec = load_tools().get(name)
        return tool_command(spec) if spec else None


def doctor_cmd(
    workspace: Annotated[Path, typer.Option(help="Workspace root (the live check runs there).")] = Path("."),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Say how user code is isolated here (bwrap or the subreaper fallback) and check it with one run."""
    from ..tools.doctor import doctor
    from ..tools.sandbox import is_secret_name

    r = doctor(workspace.resolve())
    if as_json:
        print(r.model_dump_json(indent=2))
    else:
        i = r.isolation
        out.print(f"isolation: [bold]{i.isolation}[/] ({i.reason}; WARPGRAD_SANDBOX={i.requested})", highlight=False)
        if i.bwrap_path:
            out.print(f"bwrap: {i.bwrap_path} {i.bwrap_version or ''}", highlight=False)
        out.print(f"live check: {r.live_check} in {r.live_check_s:.2f} s", highlight=False)
        out.print(f"network: {r.network}", highlight=False)
        out.print(f"kernel cache (writable): {r.kernel_cache}", highlight=False)
        out.print(f"GPU devices bound: {', '.join(r.gpu_devices) or 'none found'}", highlight=False)
        out.print(f"withheld from user code: {len(r.withheld_env)} variables"
                  + (f" (secrets among them: {', '.join(n for n in r.withheld_env if is_secret_name(n))})"
                     if any(is_secret_name(n) for n in r.withheld_env) else ""), highlight=False)
    raise typer.Exit(0 if r.live_check == "ok" else 1)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_cmd)
