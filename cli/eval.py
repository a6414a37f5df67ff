"""`warpgrad eval`: run an agent over a suite of broken simulations and grade it."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .core import console, out


def eval_cmd(
    suite: Annotated[Path | None, typer.Option(help="Suite folder in the Agent Skills evals schema (default: the shipped one).")] = None,
    agent: Annotated[str, typer.Option(help="autopilot, claude, or replay:DIR.")] = "autopilot",
    cases: Annotated[list[str] | None, typer.Option("--cases", help="Case ids to run (repeatable; default all).")] = None,
    jobs: Annotated[int, typer.Option(help="Cases run in parallel (each with its own kernel cache).")] = 2,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Folder for logs, workspaces, results.json, scoreboard.md.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds allowed per case.")] = 900.0,
    model: Annotated[str | None, typer.Option(help="Model for --agent claude.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results.json.")] = False,
) -> None:
    """Run an agent over the broken-simulation suite and score it against the hidden graders."""
    from ..evals.run_cases import CaseScore, run_suite
    from ..evals.suite import SUITE_DIR, SuiteError

    target = out_dir or Path(tempfile.mkdtemp(prefix="warpgrad-eval-"))
    # Progress on a terminal only: quiet with --json and when stderr is not a terminal (CI logs, pipes).
    show = console.is_terminal and not as_json
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, disable=not show) as bar:
            task = bar.add_task(f"{agent} over the suite", total=None)

            def advance(done: int, total: int, score: CaseScore) -> None:
                state = "crashed" if score.error else ("ran" if score.ran else "not run")
                bar.update(task, completed=done, total=total, description=f"{agent}: {score.id} {state}")

            def plan(total: int) -> None:
                bar.update(task, completed=0, total=total, description=f"{agent}: {total} case{'s' * (total != 1)}, "
                                                                    f"{min(jobs, total)} at a time")

            run = run_suite(suite or SUITE_DIR, agent, target, cases=cases, jobs=jobs, timeout_s=timeout, model=model,
                            progress=advance, planned=plan)
    except (SuiteError, ValueError) as e:
        console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    if as_json:
        print(run.model_dump_json(indent=2))
    else:
        out.print((target / "scoreboard.md").read_text(encoding="utf-8"))
        out.print(f"[dim]results: {target / 'results.json'}[/]")
    raise typer.Exit(0 if not run.summary.crashed_or_timed_out else 1)


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_cmd)
