"""Benchmark: the minimal session a model plays on a suite case, through a real MCP client over stdio.

Run: `python bench/bench_session.py [--suite evals] [--cases mpm_sand_wind,curling] [--out
bench/results/session.json]`, or `--all` for every suite case and every blind case (`evals`, `evals/blind`,
`evals/blind3`; default out `bench/results/session_all.json`). The results file is rewritten after every case, so
a run stopped early keeps the cases it finished.

Per case, on a fresh copy of its workspace, one `warpgrad mcp` server (the console script a host spawns):

1. `diagnose` on the case's entry script;
2. when diagnose found the gradient wrong, the fix: the `edit_file` call diagnose offers as a ready fix when it
   offers one, else the case's recorded fix (the grader's `fixed/` overlay) as one `apply_patch`; no call when
   the case has neither, or when diagnose found no wrong gradient. A ready fix that says it is partial (its
   `leaves`: other rule hits it does not touch) is followed, as a model follows that note, by the rest of the
   recorded fix (the overlay's diff against the edited files) as one `apply_patch` (fix `ready+recorded`);
3. `gradcheck` on the entry script;
4. `finish`: `fixed` when diagnose found the gradient wrong, else `gradients_correct`.

Per case: the calls made, the characters of text the model reads (the content blocks; the structured
content, fitted to the same budget, is counted apart; the offered edit is read from the whole record through
the resource link, as a program would), each call's wall time at the client, and the gate's answer
(accepted, or refused with the rules it lists). The session stops there even when the gate refuses:
the refusal is the finding, and the number of calls a refusal costs is what the table shows.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = Path(sys.executable).parent / "warpgrad"


class CallStat(BaseModel):
    tool: str
    text_chars: int
    structured_chars: int
    wall_s: float
    is_error: bool


class CaseStat(BaseModel):
    suite: str = "evals"
    case: str
    script: str
    verdict: str
    fix: str
    check_after: str = Field(description="The gradcheck after the fix: pass, FAIL or no verdict.")
    calls: list[CallStat]
    gate: str
    refused_rules: list[str] = []
    refusal: str = ""

    @property
    def text_chars(self) -> int:
        return sum(c.text_chars for c in self.calls)

    @property
    def wall_s(self) -> float:
        return round(sum(c.wall_s for c in self.calls), 1)


def _recorded_fix(workspace: Path, fixed: Path) -> str | None:
    """The grader's fixed/ overlay as one unified diff against the workspace (None: no overlay)."""
    from warpgrad.tools.patch import unified_diff

    if not fixed.is_dir():
        return None
    diffs = []
    for new in sorted(p for p in fixed.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = new.relative_to(fixed).as_posix()
        old = workspace / rel
        before = old.read_text(encoding="utf-8") if old.is_file() else ""
        after = new.read_text(encoding="utf-8")
        if before != after:
            diffs.append(unified_diff(rel, before, after, new_file=not old.is_file()))
    return "".join(diffs) or None


async def _call(client: Client, tool: str, arguments: dict[str, Any], calls: list[CallStat]) -> Any:
    t = time.perf_counter()
    r = await client.call_tool(tool, arguments, read_timeout_seconds=1800)
    # What the model reads: the text blocks, and a resource link's uri, name and description.
    text = sum(len(c.text) if c.type == "text" else len(f"{c.uri} {c.name} {c.description or ''}")
               for c in r.content if c.type in ("text", "resource_link"))
    # Compact JSON, as it travels (and as the tool's budget counts it).
    structured = len(json.dumps(r.structured_content, separators=(",", ":"))) if r.structured_content is not None else 0
    calls.append(CallStat(tool=tool, text_chars=text, structured_chars=structured,
                          wall_s=round(time.perf_counter() - t, 2), is_error=bool(r.is_error)))
    return r


def _ready_fix(structured: dict[str, Any] | None) -> dict[str, Any] | None:
    """The first ready fix among the top three hypotheses (its `arguments` are the edit_file call)."""
    for h in (structured or {}).get("hypotheses", [])[:3]:
        if h.get("ready_fix"):
            return h["ready_fix"]
    return None


async def play(case_id: str, workspace: Path, script: str, fixed: Path, env: dict[str, str]) -> CaseStat:
    calls: list[CallStat] = []
    params = StdioServerParameters(command=str(LAUNCHER), args=["mcp", "--workspace", str(workspace)], env=env,
                                   cwd=str(workspace))
    async with Client(params, read_timeout_seconds=1800) as client:
        d = await _call(client, "diagnose", {"script": script}, calls)
        # The structured content is fitted to the budget (strings may be cut): the offered edit is taken from the
        # whole record, read through the result's resource link as a program would (no tool call).
        link = next((c for c in d.content if c.type == "resource_link"), None)
        record = json.loads((await client.read_resource(link.uri)).contents[0].text) if link is not None else {}
        wrong = record.get("gradients_wrong")
        verdict = {True: "wrong", False: "correct", None: "no verdict"}[wrong]
        # A model follows the diagnosis: it fixes only a gradient diagnose found wrong (a recorded fix applied to a
        # program then claimed correct is refused by the gate for the modification, not for the evidence).
        ready = _ready_fix(record) if wrong else None
        diff = None if ready is not None or not wrong else _recorded_fix(workspace, fixed)
        fix = "ready" if ready is not None else ("recorded" if diff else "none")
        if ready is not None:
            await _call(client, "edit_file", ready["arguments"], calls)
            # A partial edit says what it leaves; the model fixes that too before the check (by hand: the rest of
            # the recorded fix stands for what it writes). Nothing left to add: the edit was the whole repair.
            rest = _recorded_fix(workspace, fixed) if ready.get("leaves") else None
            if rest:
                fix = "ready+recorded"
                await _call(client, "apply_patch", {"diff": rest, "reason": "the rest of the case's recorded fix"},
                            calls)
        elif diff:
            await _call(client, "apply_patch", {"diff": diff, "reason": "the case's recorded fix"}, calls)
        g = await _call(client, "gradcheck", {"script": script}, calls)
        check_after = {True: "pass", False: "FAIL", None: "no verdict"}[(g.structured_content or {}).get("passed")]
        outcome = "fixed" if wrong else "gradients_correct"
        done = await _call(client, "finish", {"outcome": outcome, "summary": f"bench session on {case_id}"}, calls)
    text = done.content[0].text if done.content else ""
    rules = sorted(set(re.findall(r"\bG\d{3}\b", text)))
    gate = f"{outcome}: " + ("accepted" if not done.is_error else "refused")
    return CaseStat(case=case_id, script=script, verdict=verdict, fix=fix, check_after=check_after, calls=calls,
                    gate=gate,
                    refused_rules=rules if done.is_error else [], refusal=text[:800] if done.is_error else "")


def table(stats: list[CaseStat]) -> str:
    lines = ["| suite | case | diagnose | fix | check after | calls | characters read | tool wall (s) | gate |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in stats:
        refused = f" ({', '.join(s.refused_rules)})" if s.refused_rules else ""
        lines.append(f"| {s.suite} | {s.case} | {s.verdict} | {s.fix} | {s.check_after} | {len(s.calls)} | "
                     f"{s.text_chars:,} | {s.wall_s} | {s.gate}{refused} |")
    if stats:
        lines.append(f"| median | | | | | {statistics.median(len(s.calls) for s in stats):g} | "
                     f"{statistics.median(s.text_chars for s in stats):,.0f} | "
                     f"{statistics.median(s.wall_s for s in stats):.1f} | "
                     f"{sum('accepted' in s.gate for s in stats)}/{len(stats)} accepted |")
    return "\n".join(lines)


def _write(out: Path, command: str, stats: list[CaseStat]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": command,
                               "cases": [s.model_dump() | {"text_chars": s.text_chars, "wall_s": s.wall_s}
                                         for s in stats], "table": table(stats)}, indent=2), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    from warpgrad.evals.suite import load_suite

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default=str(ROOT / "evals"), help="Suite folder (evals or evals/blind).")
    ap.add_argument("--all", action="store_true", help="Every suite and blind case (evals, evals/blind, "
                    "evals/blind3); --cases still narrows.")
    ap.add_argument("--cases", default="", help="Comma-separated case ids or parts of ids (default: every case "
                    "the skill should take on).")
    ap.add_argument("--out", default=None, help="Results file (default bench/results/session.json, with --all "
                    "session_all.json).")
    a = ap.parse_args(argv)
    folders = [ROOT / "evals", *sorted(p.parent for p in (ROOT / "evals").glob("blind*/evals.json"))] if a.all \
        else [Path(a.suite)]
    out = Path(a.out if a.out is not None else
               ROOT / "bench" / "results" / ("session_all.json" if a.all else "session.json"))
    wanted = [w for w in a.cases.split(",") if w]
    env = dict(os.environ)  # the server imports warpgrad as this process does (PYTHONPATH included)
    command = " ".join(["python", "bench/bench_session.py", *(argv if argv is not None else sys.argv[1:])])
    stats: list[CaseStat] = []
    for folder in folders:
        suite = load_suite(folder)
        name = folder.resolve().relative_to(ROOT).as_posix() if folder.resolve().is_relative_to(ROOT) else str(folder)
        cases = [c for c in suite.cases if c.should_trigger and c.entry
                 and (not wanted or any(w in str(c.id) for w in wanted))]
        for c in cases:
            with tempfile.TemporaryDirectory(prefix="wg-session-") as tmp:
                ws = Path(tmp) / "ws"
                shutil.copytree(suite.workspace(str(c.id)), ws)
                s = anyio.run(play, str(c.id), ws, c.entry, suite.fixed_dir(str(c.id)), env)
            s.suite = name
            print(f"{name}/{s.case}: {len(s.calls)} calls, {s.text_chars:,} characters, {s.wall_s} s, {s.gate}",
                  flush=True)
            if s.refusal:  # what refused it, as the model read it: the finding a refusal is
                print("  " + s.refusal.replace("\n", "\n  "), flush=True)
            stats.append(s)
            _write(out, command, stats)
    print(table(stats))
    _write(out, command, stats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
