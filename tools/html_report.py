"""The report as one self-contained HTML page: the numbers of the ledger (or of one `diagnose`) as pictures.

`warpgrad report --html [PATH]` renders the evidence ledger; `warpgrad diagnose --html PATH` renders one
diagnosis. The page needs no network: plots are matplotlib figures inlined as SVG (text kept as text, so
it stays searchable and sharp), the style is inline, there is no script and no external reference.

What it shows: the verdict and signature with the gate's rules that hold or fail; per FD check, AD against
FD per direction with the noise band and the step sweep (log–log, the chosen step marked); the loss
trajectories of the workflow runs (before and after a patch); the tape as a launch list with the first
launch that fails its own gradient check and every overwrite hazard at its file:line; the ledger as a
timeline. Every number in the page is copied from the record it comes from (each carries a `data-field`
naming that record and field), as the Markdown report does: the page computes nothing of its own.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel, Field

from .ledger import Ledger, LedgerRecord
from .records import GradcheckEvent, RunEvent

TEMPLATE = Path(__file__).parent / "templates" / "report.html.j2"
MAX_LAUNCHES = 200  # rows of the launch list (one per call site)


class DirectionView(BaseModel):
    direction: int
    scope: str = "all"
    step: float | None = None
    ad: float
    fd: float
    band: float | None = None
    status: str = Field(description="agree | disagree | unresolved, as the record says.")


class SweepView(BaseModel):
    step: float
    fd: float
    ad: float
    rounding_band: float | None = None


class CheckView(BaseModel):
    key: str = Field(description="Where its numbers come from: `record N` or `diagnose`.")
    role: str = ""
    passed: bool | None = None
    signature: str | None = None
    objective: str = ""
    step: float | None = None
    noise_band: float | None = None
    directions: list[DirectionView] = []
    sweep: list[SweepView] = []
    ad_fd_svg: str = ""
    sweep_svg: str = ""


class RunView(BaseModel):
    key: str
    role: str = ""
    script: str = ""
    trajectory: list[float | None] = []


class LaunchView(BaseModel):
    index: int
    kernel: str
    where: str = ""
    count: int = 1
    first_failing: bool = False
    hazards: list[str] = []


class HazardView(BaseModel):
    severity: str
    where: str
    message: str


class EventView(BaseModel):
    seq: int
    time: str
    kind: str
    label: str


class ReportView(BaseModel):
    """Everything the page shows, assembled from the ledger or from one diagnose result."""

    title: str
    headline: str
    verdict: str = Field(description="wrong | correct | none: the colour of the headline.")
    signature: str | None = None
    integrity: str = ""
    gate: list[tuple[str, bool, str]] = Field(default_factory=list, description="(rule, holds, text).")
    checks: list[CheckView] = []
    runs: list[RunView] = []
    runs_svg: str = ""
    launches: list[LaunchView] = []
    launches_hidden: int = 0
    hazards: list[HazardView] = []
    timeline: list[EventView] = []
    timeline_svg: str = ""


# ------------------------------------------------------------------------------------------------ plots

def _svg(fig: Any) -> str:
    """A matplotlib figure as inline SVG markup (text as text, no external references)."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    # The RDF metadata block only names its vocabularies; the page is smaller and the same every time without it.
    return re.sub(r"<metadata>.*?</metadata>\s*", "", text[text.index("<svg"):], flags=re.S)


def _figure(w: float, h: float) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # keep text as <text>, searchable, no embedded glyph paths
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(w, h))


def _ad_fd_plot(c: CheckView) -> str:
    if not c.directions:
        return ""
    fig, ax = _figure(4.6, 3.0)
    colours = {"agree": "#2a7a2a", "disagree": "#c0392b", "unresolved": "#888888"}
    for d in c.directions:
        ax.errorbar([d.fd], [d.ad], xerr=[d.band or 0.0], fmt="o", color=colours.get(d.status, "#333"),
                    label=d.status, capsize=3)
    lo = min(min(d.fd, d.ad) for d in c.directions)
    hi = max(max(d.fd, d.ad) for d in c.directions)
    pad = 0.1 * (hi - lo or abs(hi) or 1.0)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="#999", lw=0.8, ls="--", label="AD = FD")
    ax.set_xlabel("FD·v (bar: noise band)")
    ax.set_ylabel("AD·v")
    handles, labels = ax.get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    ax.legend(seen.values(), seen.keys(), fontsize=7)
    ax.set_title("AD against FD per direction", fontsize=9)
    return _svg(fig)


def _sweep_plot(c: CheckView) -> str:
    pts = [p for p in c.sweep if p.step > 0]
    if not pts:
        return ""
    fig, ax = _figure(4.6, 3.0)
    steps = [p.step for p in pts]
    ax.loglog(steps, [abs(p.fd) or math.nan for p in pts], "o-", label="|FD·v|")
    ax.loglog(steps, [abs(p.ad) or math.nan for p in pts], "s--", label="|AD·v|")
    bands = [p.rounding_band for p in pts]
    if any(b for b in bands):
        ax.loglog(steps, [b or math.nan for b in bands], ":", color="#888", label="rounding band")
    if c.step:
        ax.axvline(c.step, color="#c0392b", lw=1, label=f"chosen step {c.step:g}")
    ax.set_xlabel("relative step")
    ax.legend(fontsize=7)
    ax.set_title("FD step sweep", fontsize=9)
    return _svg(fig)


def _runs_plot(runs: list[RunView]) -> str:
    shown = [r for r in runs if any(v is not None for v in r.trajectory)]
    if not shown:
        return ""
    fig, ax = _figure(6.0, 3.0)
    for r in shown:
        ys = [math.nan if v is None else v for v in r.trajectory]
        ax.plot(range(len(ys)), ys, marker=".", label=f"{r.key} {r.role}".strip())
    values = [v for r in shown for v in r.trajectory if v is not None and math.isfinite(v)]
    if values and min(values) > 0 and max(values) > 20 * min(values):  # log only when it spans decades
        ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("loss")
    ax.legend(fontsize=7)
    ax.set_title("loss trajectory of the workflow runs", fontsize=9)
    return _svg(fig)


def _timeline_plot(events: list[EventView]) -> str:
    if not events:
        return ""
    kinds = sorted({e.kind for e in events})
    fig, ax = _figure(6.0, 0.5 + 0.3 * len(kinds))
    ax.scatter([e.seq for e in events], [kinds.index(e.kind) for e in events], marker="|", s=200)
    ax.set_yticks(range(len(kinds)), kinds)
    ax.set_xlabel("ledger record")
    ax.set_title("the ledger as a timeline", fontsize=9)
    return _svg(fig)


# ------------------------------------------------------------------------------------------------ views

def _status(d: dict[str, Any]) -> str:
    """A direction's status; records from before per-direction statuses have only `agree`."""
    if isinstance(d.get("status"), str):
        return d["status"]
    return "agree" if d.get("agree") else "disagree"


def check_view(key: str, payload: dict[str, Any], role: str = "") -> CheckView:
    """One FD check's numbers, copied from a gradcheck result (a ledger payload or a diagnose's)."""
    dirs = [DirectionView(direction=int(d.get("direction", i)), scope=str(d.get("scope", "all")), step=d.get("step"),
                          ad=float(d.get("ad", 0.0)), fd=float(d.get("fd", 0.0)), band=d.get("band"),
                          status=_status(d))
            for i, d in enumerate(payload.get("directions") or []) if isinstance(d, dict)]
    sweep = [SweepView(step=float(p["step"]), fd=float(p.get("fd", 0.0)), ad=float(p.get("ad", 0.0)),
                       rounding_band=p.get("rounding_band"))
             for p in payload.get("sweep") or [] if isinstance(p, dict) and "step" in p]
    c = CheckView(key=key, role=role, passed=payload.get("passed"), signature=payload.get("signature"),
                  objective=str(payload.get("objective") or ""), step=payload.get("eps"),
                  noise_band=payload.get("noise_band"), directions=dirs, sweep=sweep)
    c.ad_fd_svg, c.sweep_svg = _ad_fd_plot(c), _sweep_plot(c)
    return c


def _where(file: str | None, line: int | None) -> str:
    return f"{file}:{line}" if file and line else (file or "")


def tape_views(tape: dict[str, Any]) -> tuple[list[LaunchView], int, list[HazardView]]:
    """The first described tape as a launch list, one row per call site (kernel and file:line) in order of its
    first launch with how often it ran, marked with its overwrite hazards and the first launch that fails its
    own gradcheck; and the hazards at their file:line. A 60-step rollout of two kernels is two rows, not 120."""
    hazards = [HazardView(severity=str(h.get("severity", "")), where=_where(h.get("file"), h.get("line")),
                          message=str(h.get("message", "")))
               for h in tape.get("hazards") or [] if isinstance(h, dict)]
    tapes = [t for t in tape.get("tapes") or [] if isinstance(t, dict)]
    if not tapes:
        return [], 0, hazards
    t = tapes[0]
    failing = [int(c["index"]) for c in t.get("gradcheck") or []
               if isinstance(c, dict) and c.get("status") == "fail" and isinstance(c.get("index"), int)]
    first_failing = min(failing) if failing else None
    marks: dict[int, list[str]] = {}
    for h in tape.get("hazards") or []:
        for i in h.get("launches") or []:
            marks.setdefault(i, []).append(f"{h.get('severity', '')}: {h.get('kind', '')}")
    rows: dict[tuple[str, str], LaunchView] = {}
    for n, launch in enumerate(t.get("launches") or []):
        name = str(launch.get("kernel") or launch.get("func") or launch.get("type"))
        where = _where(launch.get("file"), launch.get("line"))
        idx = int(launch.get("index", n))
        row = rows.get((name, where))
        if row is None:
            row = rows[(name, where)] = LaunchView(index=idx, kernel=name, where=where, count=0)
        row.count += 1
        row.first_failing = row.first_failing or idx == first_failing
        row.hazards += [m for m in marks.get(idx, []) if m not in row.hazards]
    shown = list(rows.values())
    return shown[:MAX_LAUNCHES], max(0, len(shown) - MAX_LAUNCHES), hazards


def _label(r: LedgerRecord) -> str:
    e = r.event
    if isinstance(e, GradcheckEvent):
        p = e.payload
        verdict = {True: "passed", False: "FAILED", None: "no verdict"}[p.passed]
        return f"FD check {verdict} ({p.signature or '-'})"
    if isinstance(e, RunEvent):
        return f"run of {e.payload.script or '?'}: final loss {e.payload.final_loss}"
    text = r.payload.get("summary") or r.payload.get("outcome") or r.payload.get("reason") or ""
    return f"{r.kind}: {text}"[:160] if text else r.kind


def _gate_lines(workspace: Path, outcome: str | None) -> list[tuple[str, bool, str]]:
    """The gate's answer for the recorded outcome, re-checked now: each rule that fails, with what it misses."""
    if not outcome:
        return []
    from .gate import check_finish

    result = check_finish(workspace, outcome)
    if result.accepted:
        return [("gate", True, f"'{outcome}' is accepted: the ledger holds every piece of evidence it needs")]
    lines = []
    for text in result.missing:
        m = re.match(r"\[(G\d{3})[^\]]*\]\s*(.*)", text, re.S)
        lines.append((m.group(1), False, m.group(2)) if m else ("gate", False, text))
    return lines


def from_ledger(workspace: Path) -> ReportView:
    """The page for a workspace's evidence ledger."""
    from .report import build_report

    rep = build_report(workspace)
    records = Ledger(workspace).records()
    roles = {c.seq: c.role for c in rep.checks} | {r.seq: r.role for r in rep.runs}
    checks = [check_view(f"record {r.seq}", r.payload, roles.get(r.seq, ""))
              for r in records if isinstance(r.event, GradcheckEvent)]
    runs = [RunView(key=f"record {r.seq}", role=roles.get(r.seq, ""), script=r.event.payload.script or "",
                    trajectory=list(r.event.payload.loss_trajectory))
            for r in records if isinstance(r.event, RunEvent)]
    tapes = [r for r in records if r.kind in ("inspect_tape", "tape")]
    launches, hidden, hazards = tape_views(tapes[-1].payload) if tapes else ([], 0, [])
    last = checks[-1] if checks else None
    if rep.outcome:
        headline, verdict = f"Outcome: {rep.outcome}", "correct" if rep.outcome != "blocked" else "none"
    elif last is not None:
        headline = {True: "The last FD check passed", False: "The last FD check FAILED",
                    None: "The last FD check gave no verdict"}[last.passed]
        verdict = {True: "correct", False: "wrong", None: "none"}[last.passed]
    else:
        headline, verdict = "No FD check on record yet", "none"
    timeline = [EventView(seq=r.seq, time=r.time, kind=r.kind, label=_label(r)) for r in records]
    integrity = (f"ledger: {rep.records} records, "
                 + ("hash chain verified" if rep.ledger_ok else "FAILED verification: " + "; ".join(rep.ledger_problems))
                 + (", every record signed" if rep.signed else f", unsigned records {rep.unsigned}"))
    view = ReportView(title=f"warpgrad report: {workspace.name}", headline=headline, verdict=verdict,
                      signature=last.signature if last else None, integrity=integrity,
                      gate=_gate_lines(workspace, rep.outcome) if rep.ledger_ok else [],
                      checks=checks, runs=runs, launches=launches, launches_hidden=hidden, hazards=hazards,
                      timeline=timeline)
    view.runs_svg, view.timeline_svg = _runs_plot(runs), _timeline_plot(timeline)
    return view


def from_diagnose(result: Any) -> ReportView:
    """The page for one `DiagnoseResult` (`warpgrad diagnose --html`)."""
    data = json.loads(result.model_dump_json())
    checks = [check_view("diagnose", data["gradcheck"], "the FD check")] if data.get("gradcheck") else []
    run = data.get("run") or {}
    runs = [RunView(key="diagnose", role="plain run", script=str(run.get("script") or ""),
                    trajectory=list(run.get("loss_trajectory") or []))] if run else []
    launches, hidden, hazards = tape_views(data["tape"]) if data.get("tape") else ([], 0, [])
    verdict = {True: "wrong", False: "correct", None: "none"}[result.gradients_wrong]
    view = ReportView(title=f"warpgrad diagnose: {result.script}", headline=result.summary or "no summary",
                      verdict=verdict, signature=str(result.signature), checks=checks, runs=runs,
                      launches=launches, launches_hidden=hidden, hazards=hazards)
    view.runs_svg = _runs_plot(runs)
    return view


# ------------------------------------------------------------------------------------------------ page

def _num(v: Any) -> str:
    """A number exactly as JSON writes it (the ledger's own spelling), a dash for None."""
    if v is None:
        return "-"
    return json.dumps(v, allow_nan=True)


def render(view: ReportView) -> str:
    """The page: one HTML document, no script, no external reference."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE.parent), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _num
    return env.get_template(TEMPLATE.name).render(v=view)


def write_html(view: ReportView, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(view), encoding="utf-8")
    return path


def numbers_in(view: ReportView) -> Iterable[tuple[str, str]]:
    """(data-field, text) of every number the page shows for the FD checks and runs (what the browser test reads)."""
    for c in view.checks:
        for d in c.directions:
            for name in ("ad", "fd", "band"):
                yield f"{c.key}/direction {d.direction}/{name}", _num(getattr(d, name))
        for i, p in enumerate(c.sweep):
            yield f"{c.key}/sweep {i}/fd", _num(p.fd)
    for r in view.runs:
        for i, v in enumerate(r.trajectory):
            yield f"{r.key}/loss {i}", _num(v)
