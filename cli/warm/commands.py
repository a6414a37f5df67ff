"""`warpgrad server status|stop|start`: the warm server, seen and stopped by hand (cli/warm)."""

from __future__ import annotations

import os

import typer

from . import client

server_app = typer.Typer(help="The warm server that runs the forking commands (diagnose, gradcheck, run, ...).",
                         no_args_is_help=True)


def _show(status) -> None:
    from .wire import Status

    if not isinstance(status, Status):
        typer.echo("no warm server is running" + (" (one is starting)" if client.running() else ""))
        return
    typer.echo(f"warm server pid {status.pid}: {status.commands_served} commands served, {status.running} running, "
               f"up {status.started_s_ago:.0f} s, exits after {status.idle_exit_s:.0f} s idle"
               + (", stopping" if status.stopping else ""))
    typer.echo(f"  python {status.python}\n  warpgrad {status.package}\n  log {client.log_path()}")


@server_app.command("status")
def status_cmd() -> None:
    """Whether the server runs, and what it has done."""
    _show(client.control("status"))


@server_app.command("stop")
def stop_cmd() -> None:
    """Stop the server (the commands it runs finish first)."""
    status = client.control("stop")
    _show(status)


@server_app.command("start")
def start_cmd() -> None:
    """Start the server now rather than after the next forking command."""
    if not client.enabled(os.environ):
        typer.echo(f"the warm server is off here ({client.SERVER_ENV}=0, CI, or not Linux); "
                   f"{client.SERVER_ENV}=1 turns it on")
        raise typer.Exit(1)
    pid = client.start()
    typer.echo(f"started the warm server (pid {pid})" if pid is not None else "a warm server is running already")


def register(app: typer.Typer) -> None:
    app.add_typer(server_app, name="server")
