"""The `warpgrad` command line: hand-written commands plus one generated subcommand per registered tool."""

from __future__ import annotations

import functools
import importlib
import sys
import traceback

import click
import typer
from typer.core import TyperGroup

# Exit statuses of `gradcheck` (and `diagnose`): 0 match, 1 wrong, 2 no verdict; 3 is warpgrad's own failure.
INTERNAL_ERROR = 3

app = typer.Typer(
    name="warpgrad",
    pretty_exceptions_enable=False,  # an internal error is handled in `main` (exit INTERNAL_ERROR)
    help="Find and fix wrong gradients in NVIDIA Warp programs, with finite-difference evidence.",
    no_args_is_help=True,
    add_completion=False,
)

# Each module defines `register(app: typer.Typer) -> None` and adds its commands.
COMMAND_MODULES = [
    "warpgrad.cli.core",
    "warpgrad.cli.eval",
    "warpgrad.cli.workspace",
    "warpgrad.cli.agent",
    "warpgrad.cli.skill",
    "warpgrad.cli.warm.commands",
]


@functools.cache
def build() -> typer.Typer:
    # Once per process: registering twice would add every command twice.
    for mod in COMMAND_MODULES:
        importlib.import_module(mod).register(app)
    return app


@functools.cache
def command() -> TyperGroup:
    """The whole command tree: typer's commands plus `tool NAME` generated from the registry. Built once per
    process: the warm server builds it before it forks the commands it runs."""
    from .core import ToolGroup, click_commands

    group = typer.main.get_command(build())
    if not isinstance(group, TyperGroup):  # typer builds a group whenever an app has several commands
        raise TypeError(f"expected a command group, got {type(group).__name__}")
    for cmd in click_commands():  # the tools' own commands (gradcheck, run): declared with the tool
        if cmd.name in group.commands:  # a declaration must not silently replace a hand-written command
            raise TypeError(f"a tool declares the command {cmd.name!r}, which the CLI already has")
        group.add_command(cmd)  # type: ignore[arg-type]
    tools = ToolGroup("tool", help="Run any registered tool; options come from its input model.")
    # typer vendors its own copy of click; its group calls a `click.Group` child through the same methods.
    group.add_command(tools)  # type: ignore[arg-type]
    return group


def _mcp_only() -> typer.Typer | None:
    """`warpgrad mcp ...` alone: a host spawns it for every session and waits for `initialize`, so it skips
    importing every other command's module (the registry, the gate, the evals) that the full tree needs."""

    if sys.argv[1:2] != ["mcp"]:
        return None
    from .agent import mcp_cmd

    mcp_app = typer.Typer(name="warpgrad", add_completion=False)
    mcp_app.command(name="mcp")(mcp_cmd)
    mcp_app.command(name="_unused", hidden=True)(lambda: None)  # two commands keep `mcp` a subcommand
    return mcp_app


def main() -> None:
    """The command line, run in this process (`cli/entry.py` first offers a forking command to the warm server)."""
    fast = _mcp_only()
    if fast is not None:
        fast(prog_name="warpgrad")
        return
    # The generated `tool` commands are plain click commands; typer's own runner does not handle the
    # exits click raises from inside them (--help, usage errors), so they are handled here.
    try:
        command()(prog_name="warpgrad")
    except click.exceptions.Exit as e:
        raise SystemExit(e.exit_code) from None
    except click.exceptions.ClickException as e:
        e.show()
        raise SystemExit(e.exit_code) from None
    except click.exceptions.Abort:
        raise SystemExit(1) from None
    except Exception:  # noqa: BLE001 - any failure of ours, reported as ours (exit 3)
        # warpgrad itself failed. Python's default exit status 1 is `gradcheck`'s "gradients wrong", so a CI job
        # gating on it would report a crash of ours as a bug in the user's code: exit INTERNAL_ERROR instead,
        # with the traceback to report.
        traceback.print_exc()
        print(f"warpgrad: internal error (exit {INTERNAL_ERROR}); the traceback above is warpgrad's, not your "
              "program's", file=sys.stderr)
        raise SystemExit(INTERNAL_ERROR) from None
