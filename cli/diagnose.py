"""`warpgrad diagnose SCRIPT [-- ARGS]`: the measured pipeline, rendered for people, JSON or Markdown."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError
from rich.console import Console

from .core import console, out, rel_to, warm_worker, workspace_for

if TYPE_CHECKING:
    from ..tools.diagnose import DiagnoseResult


def markdown(r: DiagnoseResult) -> str:
    """The diagnosis as a Markdown report (numbers come from the result, nothing else)."""
    lines = [f"# warpgrad diagnose: `{r.script}`", "", f"**{r.summary}**", ""]
    if r.blocked:
        lines += ["## Blocker", "", f"```\n{r.blocked}\n```", ""]
        return "\n".join(lines)
    gc = r.gradcheck
    if gc is not None:
        lines += ["## Finite-difference check", "", f"- verdict: gradients_wrong = `{r.gradients_wrong}`, signature "
                  f"`{r.signature}`" + (f", factor {r.factor:g}" if r.factor is not None else ""),
                  f"- objective: {gc.objective}", f"- gradient: {gc.gradient}"]
        if gc.directions:
            lines += ["", "| direction | AD·v | FD·v | AD/FD | band | agree |", "|---|---|---|---|---|---|"]
            for c in gc.directions:
                ratio = f"{c.ratio:.6g}" if c.ratio is not None else "—"
                lines.append(f"| {c.direction} | {c.ad:.6g} | {c.fd:.6g} | {ratio} | {c.band:.3g} | {c.agree} |")
        if gc.reason:
            lines += ["", f"- reason: {gc.reason}"]
        lines.append("")
    if r.hypotheses:
        lines += ["## Hypotheses (most likely first)", ""]
        for h in r.hypotheses:
            where = f" — `{h.file}:{h.line}`" if h.file and h.line else ""
            lines.append(f"{h.rank}. **{h.title}**{where} (score {h.score:.2f}" + (f", {h.reference}" if h.reference else "") + ")")
            for e in h.evidence[:4]:
                lines.append(f"   - {e.source}: {e.detail[:400]}")
        lines.append("")
    if r.ruled_out:
        lines += ["## Ruled out", ""] + [f"- {x}" for x in r.ruled_out] + [""]
    if r.next_steps:
        lines += ["## Next", ""] + [f"- {x}" for x in r.next_steps] + [""]
    if r.run_cut_short_at is not None:
        lines += [f"The plain run was stopped after iteration {r.run_cut_short_at}, once its loss showed its trend "
                  "(`--full-run` runs it to the end).", ""]
    lines += ["## Timings (s)", "", ", ".join(f"{k} {v:.1f}" for k, v in r.timings.items()), ""]
    return "\n".join(lines)


def render(r: DiagnoseResult, con: Console) -> None:
    colour = {True: "red", False: "green", None: "yellow"}[r.gradients_wrong]
    con.print(f"[bold {colour}]{r.summary}[/]")
    if r.blocked:
        if r.run and r.run.error and r.run.error.traceback:
            for fr in r.run.error.traceback[-3:]:
                con.print(f"  {fr.get('file')}:{fr.get('line')}  {fr.get('code') or ''}")
        return
    gc = r.gradcheck
    if gc is not None and gc.directions:
        worst = max(gc.directions, key=lambda c: abs(c.ad - c.fd))
        con.print(f"FD check ({gc.objective}): AD·v {worst.ad:.6g} vs FD·v {worst.fd:.6g} "
                  f"(noise band {worst.band:.2g}, {gc.evaluations} evaluations)")
    elif gc is not None and gc.reason:
        con.print(f"[yellow]{gc.reason}[/]")
    for h in r.hypotheses[:5]:
        where = f"{h.file}:{h.line}" if h.file and h.line else "—"
        con.print(f"[bold]{h.rank}.[/] {h.title}  [cyan]{where}[/]  [dim](score {h.score:.2f})[/]")
        for e in h.evidence[:2]:
            con.print(f"     [dim]{e.source}:[/] {e.detail[:220]}")
        if h.reference:
            con.print(f"     [dim]see {h.reference}[/]")
        if h.ready_fix is not None:
            a = h.ready_fix.arguments
            con.print(f"     [green]ready fix:[/] in {a.path}, replace {a.old_text.strip()!r} with {a.new_text.strip()!r}",
                      highlight=False)
    cited = next((h.reference for h in r.hypotheses[:5] if h.reference), None)
    m = re.match(r"references/([\w-]+)\.md §(\w+)", cited or "")
    if m:
        con.print(f"[dim]read a cited section: warpgrad skill reference {m.group(1)} --section {m.group(2)}[/]")
    if r.ruled_out:
        con.print("[bold]ruled out:[/]")
        for x in r.ruled_out:
            con.print(f"  - {x}")
    for s in r.next_steps:
        con.print(f"[bold]next:[/] {s}")
    if r.run_cut_short_at is not None:
        con.print(f"[dim]the plain run stopped after iteration {r.run_cut_short_at}, once its loss showed its trend "
                  "(--full-run runs it to the end)[/]")
    con.print("[dim]" + ", ".join(f"{k} {v:.1f}s" for k, v in r.timings.items()) + "[/]")


def diagnose_cmd(
    ctx: typer.Context,
    script: Annotated[Path, typer.Argument(help="The training script (its folder's modules are imported as usual).")],
    iteration: Annotated[int | None, typer.Option(help="Training iteration to check (0-based).")] = None,
    param: Annotated[list[str] | None, typer.Option("--param", help="Parameter to check (repeatable).")] = None,
    objective: Annotated[str | None, typer.Option(help="Variable to difference instead of the seeded loss.")] = None,
    bisect: Annotated[str, typer.Option(help="Horizon bisection: auto, always or never.")] = "auto",
    device: Annotated[str | None, typer.Option(help="'cpu' forces Warp onto the CPU.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds allowed per run of the script.")] = 300.0,
    workspace: Annotated[Path | None, typer.Option(help="Workspace root (default: the current folder).")] = None,
    record: Annotated[bool, typer.Option(help="Append the evidence to .warpgrad/ledger.jsonl.")] = True,
    full_run: Annotated[bool, typer.Option("--full-run", help="Run the script to its end for the loss trajectory "
                                           "(default: stop once the printed loss shows its trend).")] = False,
    md: Annotated[Path | None, typer.Option("--md", help="Also write a Markdown report to this file.")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Also write a self-contained HTML page (plots of AD "
                                              "against FD, the step sweep, the loss and the tape) to this file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document: every field, repeats collapsed "
                                          "with a count and long lists capped with a count (--detail full: all).")] = False,
    detail: Annotated[str, typer.Option(help="summary (default) or full: with --json, the whole record.")] = "summary",
) -> None:
    """Diagnose a training script's gradients: FD check, tracker, tape, rules, localization; ranked causes.

    Exit 0: gradients correct, 1: wrong, 2: no verdict or the script cannot run. Arguments after `--` go to the script.
    """
    from ..tools.budget import compact_json
    from ..tools.registry import ToolError

    if detail not in ("summary", "full"):
        console.print(f"[red]error:[/] --detail must be summary or full (got {detail!r})")
        raise typer.Exit(2)
    ws = workspace_for(script, workspace)
    # The stages fork their runs from one warm worker instead of booting Python and Warp for each.
    try:
        with warm_worker(ws, device):
            from ..tools import progress
            from ..tools.diagnose import DiagnoseArgs, run_diagnose

            # Validated by the model: the CLI's plain strings (bisect, device) are checked against its Literals.
            args = DiagnoseArgs.model_validate({
                "script": rel_to(ws, script), "args": list(ctx.args), "iteration": iteration, "params": param or [],
                "objective": objective, "bisect": bisect, "device": device, "timeout_s": timeout, "record": record,
                "full_run": full_run})
            if as_json:
                r = run_diagnose(args, ws)
            else:
                labels = {"run": "running the script", "gradcheck": "FD check (capture and tape, then perturbed runs)",
                          "tracker": "overwrite tracker (recompiles with the flag on)", "tape": "inspecting the tape",
                          "tape_rerun": "inspecting the tape (again, at the iteration the check reported)",
                          "rules": "quick-check rules", "bisect": "bisecting the horizon"}
                stage = ["starting"]

                def staged(s: str) -> None:
                    stage[0] = labels.get(s, s)
                    status.update(f"{stage[0]}...")

                # On a terminal only: the stage, and inside it how far along (FD evaluations done of planned).
                with console.status("starting...") as status, progress.reporting(
                        (lambda m: status.update(f"{stage[0]}: {m}")) if console.is_terminal else None):
                    r = run_diagnose(args, ws, progress=staged)
    except (ToolError, ValidationError) as e:
        console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    if md:
        md.write_text(markdown(r), encoding="utf-8")
    if html:
        from ..tools.html_report import from_diagnose, write_html

        write_html(from_diagnose(r), html)
    if as_json:
        print(r.model_dump_json(indent=2) if detail == "full" else compact_json(r))
    else:
        render(r, out)
    raise typer.Exit(1 if r.gradients_wrong else (0 if r.gradients_wrong is False else 2))


def register(app: typer.Typer) -> None:
    app.command("diagnose", context_settings={"allow_extra_args": True, "ignore_unknown_options": False})(diagnose_cmd)
