"""`warpgrad skill ...`: export the skill as a standard Agent Skills folder, or print the rendered prompt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ..agent import prompt

skill_app = typer.Typer(help="The warp-debug-gradients skill (SKILL.md + references).", no_args_is_help=True)


@skill_app.command("export")
def export(
    directory: Annotated[Path, typer.Argument(help="Folder to write `warp-debug-gradients/` into.")],
    json_output: Annotated[bool, typer.Option("--json", help="Print a JSON summary for machines.")] = False,
    plugin: Annotated[bool, typer.Option("--plugin", help="Write a Claude Code plugin bundle instead: the skill, "
                                         ".mcp.json starting `warpgrad mcp`, and the finish-gate Stop hook.")] = False,
) -> None:
    """Write DIRECTORY/warp-debug-gradients/ (SKILL.md + references/) for Claude Code or any Agent Skills host."""
    if directory.exists() and not directory.is_dir():
        raise typer.BadParameter(f"{directory} exists and is not a folder; pass a folder to export into")
    if plugin:
        from ..agent.host_config import build_plugin

        written = [str(p.relative_to(directory)) for p in build_plugin(directory)]
        typer.echo(json.dumps({"plugin_dir": str(directory), "files": written}) if json_output
                   else f"Plugin bundle written to {directory}: " + ", ".join(written))
        return
    skill_dir = prompt.export_skill(directory)
    files = sorted(str(p.relative_to(skill_dir)) for p in skill_dir.rglob("*.md"))
    if json_output:
        typer.echo(json.dumps({"skill_dir": str(skill_dir), "files": files}))
        return
    from rich.console import Console

    console = Console()
    console.print(f"[bold green]Exported[/] skill to [bold]{skill_dir}[/]")
    for f in files:
        console.print(f"  {f}")
    console.print("Copy or link this folder into your host's skills directory (e.g. ~/.claude/skills/).")


@skill_app.command("show")
def show(
    standalone: Annotated[
        bool, typer.Option(help="Render the exported SKILL.md instead of the prompt body.")
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print a JSON object for machines.")] = False,
) -> None:
    """Print the rendered skill: the system-prompt body, or with --standalone the exported SKILL.md."""
    text = prompt.render_standalone_skill() if standalone else prompt.render_skill()
    if json_output:
        typer.echo(json.dumps({"text": text, "references": prompt.reference_names()}))
    else:
        typer.echo(text, nl=False)


@skill_app.command("reference")
def reference(
    name: Annotated[str, typer.Argument(help="quick-checks, verification, custom-gradients or case-studies.")],
    section: Annotated[str | None, typer.Option(help="Only this section, e.g. 1, 6b or 9a (as diagnose cites it).")] = None,
) -> None:
    """Print a reference document (or one § section of it): where diagnose and the rules point."""
    try:
        text = prompt.read_reference(name)
    except KeyError as e:
        typer.echo(str(e.args[0]), err=True)
        raise typer.Exit(2) from None
    if section:
        lines, out, depth = text.splitlines(), [], None
        for line in lines:
            heading = line.split(" ", 1)[0] if line.startswith("#") else None
            if heading and depth is not None and len(heading) <= depth:
                break
            if heading and depth is None and line.split(" ", 2)[1:2] == [f"§{section}"]:
                depth = len(heading)
            if depth is not None:
                out.append(line)
        if not out:
            typer.echo(f"no section §{section} in {name}", err=True)
            raise typer.Exit(2)
        text = "\n".join(out) + "\n"
    typer.echo(text, nl=False)


def register(app: typer.Typer) -> None:
    app.add_typer(skill_app, name="skill")
