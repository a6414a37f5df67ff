"""`warpgrad eval`: stage each case in a fresh workspace, run an agent on it, grade it with the hidden grader.

Each case runs in its own subprocess (`python -m warpgrad.evals.runner --one ...`) with its own Warp
kernel cache, so cases run in parallel safely and a case that hangs or crashes is scored as failed
with its log while the run goes on.

Agents:
* `autopilot`: `warpgrad diagnose` on the case's entry script (no fixes yet: it diagnoses only);
* `claude`: the chat agent, non-interactive (needs ANTHROPIC_API_KEY);
* `replay:DIR`: replays `DIR/<case_id>/trajectory.jsonl` (recorded sessions become reproducible runs).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from warpgrad.evals.suite import CaseMeta, Suite, load_suite

ROOT_CAUSE_SLACK = 2  # lines: a multi-line statement is one place
GRADER_PROBE = "_warpgrad_grader_probe.py"


class CaseScore(BaseModel):
    id: str
    should_trigger: bool
    ran: bool = Field(False, description="The agent finished without crashing or timing out.")
    error: str | None = None
    expected_verdict: str | None = None
    verdict: str | None = None
    verdict_right: bool | None = None
    expected_signature: str | None = None
    signature: str | None = None
    signature_right: bool | None = None
    root_cause_rank: int | None = Field(None, description="Rank of the first hypothesis at a root-cause line.")
    root_cause_top3: bool | None = None
    patched: bool = False
    fix_verified: bool | None = Field(None, description="Hidden FD check after the agent's patch (None: no patch).")
    objective_unchanged: bool | None = None
    gate_satisfied: bool | None = None
    triggered: bool | None = None
    no_harm: bool = True
    harm: list[str] = []
    tool_calls: int = 0
    tokens: int = 0
    wall_s: float = 0.0
    log: str | None = None


class EvalRun(BaseModel):
    suite: str
    agent: str
    cases: list[CaseScore]
    summary: dict[str, Any] = {}
    wall_s: float = 0.0


def _hashes(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and ".warpgrad" not in p.parts and "__pycache__" not in p.parts:
            out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _root_cause_rank(case: CaseMeta, places: list[tuple[str | None, int | None]]) -> int | None:
    for rank, (file, line) in enumerate(places, 1):
        if file is None or line is None:
            continue
        for rc in case.root_cause:
            if rc.file == file and abs(rc.line - line) <= ROOT_CAUSE_SLACK:
                return rank
    return None


def _verdict(gradients_wrong: bool | None) -> str | None:
    return None if gradients_wrong is None else ("gradients_wrong" if gradients_wrong else "gradients_correct")


def _grade_fix(suite: Suite, case: CaseMeta, ws: Path, score: CaseScore) -> None:
    """The hidden FD check on the patched workspace, and the guard on the objective."""
    from warpgrad.tools.gradcheck import GradcheckArgs, check

    probe_src = suite.probe(str(case.id))
    if not probe_src.is_file():
        return
    dest = ws / GRADER_PROBE
    shutil.copy(probe_src, dest)
    try:
        after = check(GradcheckArgs(probe=GRADER_PROBE, record=False), ws)
    finally:
        dest.unlink(missing_ok=True)
    score.fix_verified = bool(after.ok and after.passed)
    pristine = ws.parent / f"{ws.name}-pristine"
    shutil.copytree(suite.workspace(str(case.id)), pristine, dirs_exist_ok=True)
    shutil.copy(probe_src, pristine / GRADER_PROBE)
    try:
        before = check(GradcheckArgs(probe=GRADER_PROBE, record=False), pristine)
    finally:
        shutil.rmtree(pristine, ignore_errors=True)
    if before.objective_value is not None and after.objective_value is not None:
        tol = 1e-4 * max(abs(before.objective_value), 1e-12)
        score.objective_unchanged = abs(before.objective_value - after.objective_value) <= tol


def run_autopilot(case: CaseMeta, ws: Path, score: CaseScore) -> None:
    from warpgrad.tools.diagnose import DiagnoseArgs, run_diagnose

    r = run_diagnose(DiagnoseArgs(script=case.entry, timeout_s=120), ws)
    (ws.parent / f"{ws.name}.diagnose.json").write_text(r.model_dump_json(indent=2), encoding="utf-8")
    score.verdict = _verdict(r.gradients_wrong) if r.ok else None
    score.signature = r.signature if r.ok else None
    score.root_cause_rank = _root_cause_rank(case, [(h.file, h.line) for h in r.hypotheses])
    score.triggered = True


def _ledger_grading(case: CaseMeta, ws: Path, score: CaseScore) -> None:
    """Verdict, signature and root cause of a model-driven session, read from its ledger."""
    from warpgrad.tools.gate import check_finish
    from warpgrad.tools.ledger import Ledger

    records = Ledger(ws).records()
    checks = [r for r in records if r.kind == "gradcheck" and r.payload.get("ok")]
    if checks:
        first = checks[0].payload
        score.verdict = _verdict(None if first.get("passed") is None else not first["passed"])
        score.signature = first.get("signature")
    diags = [r for r in records if r.kind == "diagnose"]
    places: list[tuple[str | None, int | None]] = []
    for d in diags[:1]:
        places += [(h.get("file"), h.get("line")) for h in d.payload.get("hypotheses", [])]
    for p in (r for r in records if r.kind == "patch"):
        for path in (p.payload.get("paths") or []):
            for line in p.payload.get("lines", {}).get(path, []) if isinstance(p.payload.get("lines"), dict) else []:
                places.append((path, line))
    score.patched = any(r.kind == "patch" for r in records)
    score.root_cause_rank = _root_cause_rank(case, places)
    finishes = [r for r in records if r.kind == "finish"]
    if finishes:
        outcome = finishes[-1].payload.get("outcome")
        score.gate_satisfied = bool(outcome) and check_finish(ws, outcome).accepted
    score.triggered = any(r.kind in ("gradcheck", "diagnose", "tracker") for r in records)


def run_claude(case: CaseMeta, ws: Path, score: CaseScore, model: str | None) -> None:
    from warpgrad.agent.chat import make_client
    from warpgrad.agent.loop import Agent, AgentConfig

    config = AgentConfig(model=model) if model else AgentConfig()
    agent = Agent(make_client(), config, ws)
    agent.run(case.prompt)
    score.tool_calls = int(agent.totals.get("steps", 0))
    score.tokens = int(agent.totals.get("input_tokens", 0) + agent.totals.get("output_tokens", 0))
    _ledger_grading(case, ws, score)


def run_replay(case: CaseMeta, ws: Path, score: CaseScore, recorded: Path) -> None:
    from warpgrad.agent.chat import replay

    traj = recorded / str(case.id) / "trajectory.jsonl"
    if not traj.is_file():
        raise FileNotFoundError(f"no recorded trajectory {traj}")
    calls = replay(traj, ws)
    score.tool_calls = len(calls)
    _ledger_grading(case, ws, score)


def run_one(suite_dir: Path, case_id: str, agent: str, out: Path, model: str | None = None) -> CaseScore:
    """Stage, run and grade one case (called inside the per-case subprocess)."""
    suite = load_suite(suite_dir)
    case = suite.case(case_id)
    score = CaseScore(id=str(case.id), should_trigger=case.should_trigger, expected_verdict=case.expected_verdict,
                      expected_signature=case.expected_signature)
    ws = out / "workspaces" / str(case.id)
    shutil.rmtree(ws, ignore_errors=True)
    ws.mkdir(parents=True)
    if suite.workspace(str(case.id)).is_dir():
        shutil.copytree(suite.workspace(str(case.id)), ws, dirs_exist_ok=True)
    source_before = _hashes(suite.workspace(str(case.id))) if suite.workspace(str(case.id)).is_dir() else {}
    staged = _hashes(ws)
    t = time.monotonic()
    if not case.should_trigger:
        if agent == "autopilot":
            score.ran, score.triggered = True, None  # autopilot has no prompt to decline
        elif agent == "claude":
            run_claude(case, ws, score, model)
            score.ran = True
        else:
            run_replay(case, ws, score, Path(agent.split(":", 1)[1]))
            score.ran = True
    else:
        if agent == "autopilot":
            run_autopilot(case, ws, score)
        elif agent == "claude":
            run_claude(case, ws, score, model)
        elif agent.startswith("replay:"):
            run_replay(case, ws, score, Path(agent.split(":", 1)[1]))
        else:
            raise ValueError(f"unknown agent {agent!r}: autopilot, claude or replay:DIR")
        score.ran = True
        if case.expected_signature == "inconclusive":
            # "FD cannot judge this as it stands" is the right verdict when the case is built so it cannot.
            score.verdict_right = score.signature == "inconclusive" or score.verdict == score.expected_verdict
        elif score.expected_verdict:
            score.verdict_right = score.verdict == score.expected_verdict
        if score.expected_signature and score.signature:
            score.signature_right = score.signature == score.expected_signature
        if case.expected_verdict == "gradients_wrong":
            score.root_cause_top3 = score.root_cause_rank is not None and score.root_cause_rank <= 3
        if score.patched:
            _grade_fix(suite, case, ws, score)
    score.wall_s = round(time.monotonic() - t, 2)
    after = _hashes(ws)
    missing = sorted(set(staged) - set(after))
    if missing:
        score.no_harm, score.harm = False, [f"deleted {m}" for m in missing]
    if source_before and _hashes(suite.workspace(str(case.id))) != source_before:
        score.no_harm = False
        score.harm.append("changed the suite's own fixture (a write outside the workspace)")
    return score


def _child(suite_dir: Path, case_id: str, agent: str, out: Path, timeout_s: float, model: str | None) -> CaseScore:
    from warpgrad.tools.runner import run_process

    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    result = out / "scores" / f"{case_id}.json"
    result.parent.mkdir(parents=True, exist_ok=True)
    result.unlink(missing_ok=True)
    env = dict(os.environ)
    env["WARP_CACHE_PATH"] = str(out / "kernel-cache" / case_id)  # one cache per case: no concurrent compiles
    argv = [sys.executable, "-m", "warpgrad.evals.runner", "--one", case_id, "--suite", str(suite_dir), "--agent", agent,
            "--out", str(out)] + (["--model", model] if model else [])
    proc = run_process(argv, cwd=out, env=env, timeout_s=timeout_s, memory_mb=None, tail_bytes=200_000)
    log = logs / f"{case_id}.log"
    log.write_text(f"$ {' '.join(argv)}\n--- stdout\n{proc.stdout_tail}\n--- stderr\n{proc.stderr_tail}\n",
                   encoding="utf-8")
    if result.is_file():
        score = CaseScore.model_validate_json(result.read_text(encoding="utf-8"))
    else:
        case = load_suite(suite_dir).case(case_id)
        score = CaseScore(id=case_id, should_trigger=case.should_trigger, expected_verdict=case.expected_verdict,
                          expected_signature=case.expected_signature,
                          error=f"the case {proc.describe()}; see {log}", wall_s=proc.wall_s)
        if case.expected_verdict == "gradients_wrong":
            score.root_cause_top3 = False
        if case.should_trigger:
            score.verdict_right = score.signature_right = False
    score.log = str(log)
    return score


def _pct(xs: list[bool | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return round(100.0 * sum(vals) / len(vals), 1) if vals else None


def summarize(scores: list[CaseScore]) -> dict[str, Any]:
    pos = [s for s in scores if s.should_trigger]
    wrong = [s for s in pos if s.expected_verdict == "gradients_wrong"]
    neg = [s for s in scores if not s.should_trigger]
    return {
        "cases": len(scores), "positive": len(pos), "negative": len(neg),
        "verdict_right_pct": _pct([bool(s.verdict_right) for s in pos]),
        "signature_right_pct": _pct([bool(s.signature_right) for s in pos]),
        "root_cause_top3_pct": _pct([bool(s.root_cause_top3) for s in wrong]),
        "fix_verified_pct": _pct([s.fix_verified for s in pos]),
        "gate_satisfied_pct": _pct([s.gate_satisfied for s in pos]),
        "negatives_not_triggered_pct": _pct([None if s.triggered is None else not s.triggered for s in neg]),
        "no_harm_pct": _pct([s.no_harm for s in scores]),
        "crashed_or_timed_out": [s.id for s in scores if s.error],
        "median_wall_s": sorted(s.wall_s for s in scores)[len(scores) // 2] if scores else None,
    }


def scoreboard(run: EvalRun) -> str:
    s = run.summary

    def mark(v: bool | None) -> str:
        return "—" if v is None else ("yes" if v else "**no**")

    lines = [f"# warpgrad eval: {run.agent}", "", (f"suite `{run.suite}`, {s['cases']} cases ({s['positive']} positive, "
             f"{s['negative']} negative), {run.wall_s:.0f} s wall"), "",
             "| score | value |", "|---|---|"]
    for k in ("verdict_right_pct", "signature_right_pct", "root_cause_top3_pct", "fix_verified_pct",
              "gate_satisfied_pct", "negatives_not_triggered_pct", "no_harm_pct"):
        v = s.get(k)
        lines.append(f"| {k.removesuffix('_pct').replace('_', ' ')} | {'—' if v is None else f'{v}%'} |")
    lines += ["", "| case | verdict (expected) | signature (expected) | root cause rank | fix verified | harm | s |",
              "|---|---|---|---|---|---|---|"]
    for c in run.cases:
        verdict = f"{c.verdict or '—'} ({c.expected_verdict or '—'})"
        sig = f"{c.signature or '—'} ({c.expected_signature or '—'})"
        err = f" error: {c.error[:60]}" if c.error else ""
        lines.append(f"| {c.id} | {mark(c.verdict_right)} {verdict} | {mark(c.signature_right)} {sig} | "
                     f"{c.root_cause_rank or '—'} | {mark(c.fix_verified)} | {'none' if c.no_harm else '; '.join(c.harm)} "
                     f"| {c.wall_s:.0f}{err} |")
    return "\n".join(lines) + "\n"


def run_suite(suite_dir: Path, agent: str, out: Path, *, cases: list[str] | None = None, jobs: int = 2,
              timeout_s: float = 900.0, model: str | None = None) -> EvalRun:
    suite = load_suite(suite_dir)
    ids = [str(c.id) for c in suite.cases]
    if cases:
        unknown = sorted(set(cases) - set(ids))
        if unknown:
            raise ValueError(f"unknown case ids: {', '.join(unknown)}")
        ids = [i for i in ids if i in cases]
    out.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        scores = list(pool.map(lambda cid: _child(suite.root, cid, agent, out, timeout_s, model), ids))
    run = EvalRun(suite=str(suite.root), agent=agent, cases=scores, summary=summarize(scores),
                  wall_s=round(time.monotonic() - t, 1))
    (out / "results.json").write_text(run.model_dump_json(indent=2), encoding="utf-8")
    (out / "scoreboard.md").write_text(scoreboard(run), encoding="utf-8")
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m warpgrad.evals.runner")
    ap.add_argument("--one", required=True)
    ap.add_argument("--suite", type=Path, required=True)
    ap.add_argument("--agent", default="autopilot")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", default=None)
    a = ap.parse_args(argv)
    score = run_one(a.suite, a.one, a.agent, a.out, a.model)
    (a.out / "scores" / f"{a.one}.json").write_text(score.model_dump_json(indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
