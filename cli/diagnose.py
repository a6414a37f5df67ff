"""How `warpgrad diagnose` shows a result to a person (terminal, Markdown, HTML); the command itself is derived
from the `diagnose` tool's declaration (`tools/diagnose.py`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from .core import out

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
            if h.ready_fix.leaves:  # one of two repairs: the check after this edit alone still fails
                con.print(f"     [yellow]partial:[/] it does not touch {'; '.join(h.ready_fix.leaves)}", highlight=False)
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


def render_out(r: DiagnoseResult) -> None:
    """`warpgrad diagnose`'s screen (its `CliCommand.render`)."""
    render(r, out)


def write_markdown(r: DiagnoseResult, path: Path) -> None:
    """`--md PATH`."""
    path.write_text(markdown(r), encoding="utf-8")


def write_html_page(r: DiagnoseResult, path: Path) -> None:
    """`--html PATH`: the self-contained page with its plots."""
    from ..tools.html_report import from_diagnose, write_html

    write_html(from_diagnose(r), path)
