"""The `warpgrad` command line: hand-written commands plus one generated subcommand per registered tool."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="warpgrad",
    help="Find and fix wrong gradients in NVIDIA Warp programs, with finite-difference evidence.",
    no_args_is_help=True,
    add_completion=False,
)

# Each module defines `register(app: typer.Typer) -> None` and adds its commands.
COMMAND_MODULES = [
    "warpgrad.agent.cmd_core",
    "warpgrad.agent.cmd_workspace",
    "warpgrad.agent.cmd_agent",
]


def build() -> typer.Typer:
    for mod in COMMAND_MODULES:
        importlib.import_module(mod).register(app)
    return app


def main() -> None:
    build()()
