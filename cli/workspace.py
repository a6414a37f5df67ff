"""CLI commands over the workspace's evidence: `warpgrad undo`, `warpgrad gate`, `warpgrad report`.

`warpgrad gate --outcome fixed` is the finish gate as a process: exit 0 when the ledger proves the
outcome, 2 when it does not (missing pieces on stderr), so a Claude Code Stop or PreToolUse hook can
enforce it in a host warpgrad does not control.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markdown import Markdown

from ..tools.gate import OUTCOMES, RULES, GateResult, check_finish
from ..tools.ledger import Ledger
from ..tools.records import FinishEvent
from ..tools.registry import ToolError
from ..tools.report import build_report, render_markdown, report_json
from ..tools.workspace import undo

_WS = Annotated[Path, typer.Option("--workspace", "-w", help="Workspace root (default: the current directory).")]
_JSON = Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of text for people.")]


def _require_workspace(workspace: Path, command: str) -> None:
    """A missing folder is an error, never an empty report or an empty ledger."""
    if not workspace.is_dir():
        what = "is not a folder" if workspace.exists() else "does not exist"
        print(f"warpgrad {command}: the workspace {workspace} {what}; pass the folder that holds .warpgrad/ "
              "(--workspace)", file=sys.stderr)
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    @app.command("undo")
    def undo_cmd(
        all_: Annotated[bool, typer.Option("--all", help="Undo every patch, newest first.")] = False,
        force: Annotated[bool, typer.Option("--force", help="Restore even files changed since the patch.")] = False,
        workspace: _WS = Path("."),
        as_json: _JSON = False,
    ) -> None:
        """Restore the files of the last patch (or of every patch) from .warpgrad/backups/."""
        try:
            res = undo(workspace, all_patches=all_, force=force)
        except ToolError as e:
            if as_json:
                print(json.dumps({"error": str(e)}))
            else:
                Console(stderr=True).print(f"[red]undo refused:[/red] {e}", highlight=False)
            raise typer.Exit(1) from None
        if as_json:
            print(res.model_dump_json())
            return
        con = Console()
        for line in res.recovered:
            con.print(f"[yellow]recovered:[/yellow] {line}", highlight=False)
        for p in res.restored:
            con.print(f"restored [bold]{p}[/bold]", highlight=False)
        for p in res.removed:
            con.print(f"removed {p} (created by the patch)", highlight=False)
        con.print(res.message, highlight=False)

    @app.command("gate")
    def gate_cmd(
        outcome: Annotated[str | None, typer.Option(
            "--outcome", help=f"One of: {', '.join(OUTCOMES)}. Default: the outcome of the last finish, rechecked "
                              "against the files now (a Stop hook: no accepted finish, no stop).")] = None,
        workspace: _WS = Path("."),
        as_json: _JSON = False,
        rules: Annotated[bool, typer.Option("--rules", help="List the gate's validity rules and exit.")] = False,
    ) -> None:
        """Check the finish gate: exit 0 when the ledger proves OUTCOME, 2 with what is missing when not."""
        if rules:
            if as_json:
                print(json.dumps([r.model_dump() for r in RULES.values()], indent=1))
            else:
                for r in RULES.values():
                    print(f"{r.id} {r.name}: {r.summary}\n  refuses: {r.refuses}\n  why: {r.why}\n"
                          f"  satisfied by: {r.satisfied_by}\n  supplied by: {r.call}")
            return
        _require_workspace(workspace, "gate")
        if outcome is None:
            last = next((r for r in reversed(Ledger(workspace).records()) if r.kind == "finish"), None)
            if last is None:
                res = GateResult(outcome="none", accepted=False, missing=[
                    ("a finish: end the session with the finish tool (outcome=fixed, gradients_correct, "
                    "not_a_gradient_bug, blocked or diagnosis_only) once the evidence is on record")])
            else:
                said = last.event.payload.outcome if isinstance(last.event, FinishEvent) else None
                res = check_finish(workspace, str(said))
        else:
            res = check_finish(workspace, outcome)
        outcome = res.outcome
        if as_json:
            print(res.model_dump_json())
        elif res.accepted:
            Console().print(f"[green]gate: {outcome} is proven by the ledger[/green]", highlight=False)
        if not res.accepted:
            # stderr is what a Claude Code hook feeds back to the model on exit code 2.
            print(f"warpgrad gate: '{outcome}' is not proven by the evidence ledger. Missing:", file=sys.stderr)
            for m in res.missing:
                print(f"- {m}", file=sys.stderr)
            raise typer.Exit(2)

    @app.command("symptom-gone")
    def symptom_gone_cmd(
        statement: Annotated[str, typer.Argument(help="What you, the user, saw: e.g. 'training converges now'.")],
        workspace: _WS = Path("."),
    ) -> None:
        """Record that you (the user) confirm the symptom you reported is gone, after the patch.

        The finish gate accepts this in place of a workflow rerun that shows the objective improving. It
        must be typed at a terminal: an agent's shell has no terminal on stdin, so it cannot confirm for you.
        """
        if not sys.stdin.isatty():
            print("warpgrad symptom-gone: refused: run it yourself at a terminal; the confirmation must come "
                  "from the user, not from an agent's shell", file=sys.stderr)
            raise typer.Exit(1)
        rec = Ledger(workspace).append("symptom_gone", {"user_confirmed": True, "statement": statement},
                                       tool="symptom-gone")
        Console().print(f"recorded (ledger record {rec.seq})", highlight=False)

    @app.command("report")
    def report_cmd(
        workspace: _WS = Path("."),
        as_json: _JSON = False,
        output: Annotated[Path | None, typer.Option("--output", "-o", help="Also write the report to this file.")] = None,
        html: Annotated[Path | None, typer.Option("--html", help="Also write the report as one self-contained HTML "
                                                   "page (plots inlined, no network) to this file.")] = None,
    ) -> None:
        """Render the report from the evidence ledger alone (Markdown, or JSON with --json; --html for a page)."""
        _require_workspace(workspace, "report")
        if html is not None:
            from ..tools.html_report import from_ledger, write_html

            Console(stderr=True).print(f"wrote {write_html(from_ledger(workspace), html)}", highlight=False)
        rep = build_report(workspace)
        text = report_json(rep) if as_json else render_markdown(rep)
        if output is not None:
            output.write_text(text, encoding="utf-8")
        if as_json or not sys.stdout.isatty():
            print(text, end="")
        else:
            Console().print(Markdown(text))
