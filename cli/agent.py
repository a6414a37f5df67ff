"""CLI commands for the agent front ends: `warpgrad chat`, `warpgrad replay`, `warpgrad mcp`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

References = Literal["auto", "tool", "inline"]
Host = Literal["claude-code", "claude-desktop", "cursor", "claude-code-hooks"]


def register(app: typer.Typer) -> None:
    app.command(name="chat")(chat_cmd)
    app.command(name="replay")(replay_cmd)
    app.command(name="mcp")(mcp_cmd)
    app.command(name="stop-hook")(stop_hook_cmd)


def chat_cmd(
    workspace: Annotated[Path, typer.Argument(help="Folder holding the program (default: here).")] = Path(
        "."
    ),
    script: Annotated[str | None, typer.Option(help="The training script, workspace-relative.")] = None,
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="First request (default: ask).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model (default: $WARPGRAD_MODEL or a current Sonnet).")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Apply edits without asking.")] = False,
    resume: Annotated[bool, typer.Option(help="Continue the latest session in this workspace.")] = False,
    session: Annotated[Path | None, typer.Option(help="Continue this trajectory.jsonl.")] = None,
    max_steps: Annotated[int, typer.Option(help="Most model calls.")] = 60,
    max_cost: Annotated[float, typer.Option(help="Most USD of token usage.")] = 5.0,
    max_minutes: Annotated[float, typer.Option(help="Most wall-clock minutes per turn.")] = 60.0,
    references: Annotated[
        References, typer.Option(help="auto | tool (read on demand) | inline (in the prompt).")
    ] = "auto",
    stream: Annotated[bool, typer.Option(help="Stream the model's text as it is written.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary at the end.")] = False,
) -> None:
    """Find and fix a wrong gradient with Claude driving the warpgrad tools (needs ANTHROPIC_API_KEY)."""
    from rich.console import Console
    from rich.prompt import Confirm

    from ..agent.chat import DEFAULT_TASK, NoApiKey, chat, make_client
    from ..agent.loop import AgentConfig
    from ..agent.trajectory import Trajectory

    console = Console(stderr=as_json)
    ws = workspace.resolve()
    if not ws.is_dir():
        raise typer.BadParameter(f"{workspace} is not a folder")
    try:
        client = make_client()
    except NoApiKey as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(2) from None
    resume_path = session or (Trajectory.latest(ws) if resume else None)
    if resume and resume_path is None:
        typer.echo(f"no earlier session under {ws / '.warpgrad' / 'sessions'}; starting a new one", err=True)
    task = message or (DEFAULT_TASK.format(script=f"`{script}`") if script and not resume_path else None)
    config = AgentConfig(
        model=model or "",
        step_limit=max_steps,
        cost_limit=max_cost,
        time_limit=max_minutes * 60,
        references=references,
        stream=stream,
    )
    summary = chat(
        ws,
        client,
        config,
        console=console,
        task=task,
        read_input=lambda: console.input("[bold green]you>[/] "),
        ask=None if yes else (lambda q: Confirm.ask(q, default=True, console=console)),
        resume=resume_path,
    )
    if as_json:
        typer.echo(json.dumps(summary, default=str))
    if summary["stop"] not in ("finished", "ended by user"):
        raise typer.Exit(3)


def replay_cmd(
    trajectory: Annotated[Path, typer.Argument(help="A trajectory.jsonl from .warpgrad/sessions/.")],
    workspace: Annotated[
        Path | None, typer.Option(help="Run against this folder (default: the one the trajectory lives in).")
    ] = None,
    rtol: Annotated[float, typer.Option(help="Relative tolerance for numbers.")] = 1e-6,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Re-run a recorded session's tool calls against a workspace and report what came out differently."""
    from rich.console import Console
    from rich.markup import escape

    from ..agent.chat import replay

    path = trajectory.resolve()
    ws = workspace or (path.parents[3] if path.parent.parent.name == "sessions" else Path("."))
    results = replay(path, ws.resolve(), rtol=rtol)
    if as_json:
        typer.echo(json.dumps(results))
    else:
        console = Console()
        for r in results:
            mark = "[green]same[/]" if r["same"] else "[red]differs[/]"
            console.print(f"{mark} {escape(r['name'])} [dim]{r['id']}[/]")
            for d in r["differences"][:10]:
                console.print(f"    {escape(d)}", highlight=False)
        n = sum(not r["same"] for r in results)
        console.print(f"{len(results)} tool calls replayed in {ws}, {n} differ.")
    if any(not r["same"] for r in results):
        raise typer.Exit(1)


def mcp_cmd(
    workspace: Annotated[Path, typer.Option(help="The workspace the tools act on (default: here).")] = Path(
        "."
    ),
    print_config: Annotated[Host | None, typer.Option(help="Print the host configuration and exit.")] = None,
    tool_timeout: Annotated[
        float, typer.Option(help="Seconds before a tool call is answered as timed out.")
    ] = 1800.0,
) -> None:
    """Serve the warpgrad tools, skill prompt and references over MCP on stdio."""
    import anyio

    from ..agent.host_config import print_config as config_for
    from ..agent.mcp_server import serve_stdio

    ws = workspace.resolve()
    if not ws.is_dir():
        typer.echo(f"{workspace} is not a folder", err=True)
        raise typer.Exit(2)
    if print_config:
        typer.echo(config_for(print_config, ws))
        return
    if sys.stdin.isatty():
        typer.echo(
            f"warpgrad MCP server on stdio for {ws} (an MCP host starts this; Ctrl-C to stop)", err=True
        )
    anyio.run(serve_stdio, ws, tool_timeout)


def stop_hook_cmd(
    workspace: Annotated[Path | None, typer.Option(help="Workspace (default: the hook input's cwd).")] = None,
) -> None:
    """Claude Code Stop hook: exit 2 (the reason on stderr) while a patch stands without its proof."""
    from ..agent.host_config import stop_hook_verdict

    hook_input: dict = {}
    if not sys.stdin.isatty():
        try:
            hook_input = json.loads(sys.stdin.read() or "{}")
        except json.JSONDecodeError:
            hook_input = {}
    ws = (workspace or Path(hook_input.get("cwd") or ".")).resolve()
    if not (ws / ".warpgrad").is_dir():
        return  # warpgrad never ran here: nothing to hold
    reason = stop_hook_verdict(ws)
    if reason:
        typer.echo(reason, err=True)
        raise typer.Exit(2)


if __name__ == "__main__":  # `python -m warpgrad.cli.agent mcp ...` works even if other commands break
    _app = typer.Typer(add_completion=False)
    register(_app)
    _app()
