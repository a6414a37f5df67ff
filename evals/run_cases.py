"""`warpgrad eval`: stage each case in a fresh workspace, run an agent on it, grade it with the hidden grader.

Each case runs in its own subprocess (`python -m warpgrad.evals.run_cases --one ...`) with its own Warp
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..tools.signatures import Signature
from .judge import AssertionGrade, Judgement, judge, ungraded
from .suite import CaseMeta, Suite, load_suite

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
    fix_verified: bool | None = Field(None, description="After the agent's patch: warpgrad's FD check and the case's "
                                      "independent grader both pass, and the objective is unchanged (None: no patch).")
    warpgrad_fix_check: bool | None = Field(None, description="warpgrad's own FD check of the patched workspace passed.")
    grader_fix_check: bool | None = Field(None, description="The independent grader (graders/fdcheck.py) passed.")
    fix_disagreement: str | None = Field(None, description="Why the fix check is not verified when the two checks "
                                         "disagree, or the grader could not run.")
    objective_unchanged: bool | None = None
    gate_satisfied: bool | None = None
    triggered: bool | None = None
    no_harm: bool = True
    harm: list[str] = []
    tool_calls: int = 0
    tokens: int = 0
    wall_s: float = 0.0
    log: str | None = None
    graded_by: Literal["graders", "judge", "ungraded"] = Field(
        "graders", description="graders: the suite's hidden graders; judge: an LLM judge over the assertions "
        "(a suite with no graders); ungraded: neither could grade (`judge_note` says why).")
    answer: str | None = Field(None, description="The agent's answer, as the judge read it (suites with no graders).")
    assertions: list[AssertionGrade] = Field(default_factory=list, description="Each assertion, graded or not.")
    judge_note: str | None = None


class ScoreLine(BaseModel):
    """One percentage of the scoreboard: over every case it applies to, with the constant-answer baseline."""

    name: str
    cases: int = Field(description="Cases counted (all the score applies to: unattempted and crashed count as failed).")
    value_pct: float | None = Field(description="None only when no case of the suite applies.")
    baseline_pct: float | None = Field(description="What the best constant answer scores on the same cases.")
    baseline: str = Field(description="That constant answer, in words.")


class Summary(BaseModel):
    cases: int
    positive: int
    negative: int
    scores: list[ScoreLine]
    objective_changed: list[str] = Field(default_factory=list,
                                         description="Patched cases whose patch changed the objective the script reports.")
    objective_unchanged: int = Field(0, description="Patched cases whose objective the hidden probe shows unchanged.")
    patched: int = 0
    fix_disagreements: list[str] = Field(default_factory=list, description="'case: why' where the fix checks disagree.")
    crashed_or_timed_out: list[str] = Field(default_factory=list)
    ungraded: list[str] = Field(default_factory=list, description="Cases nothing could grade (no graders and no "
                                "LLM judge): their answers are listed beside their assertions.")
    median_wall_s: float | None = None

    def score(self, name: str) -> ScoreLine:
        return next(s for s in self.scores if s.name == name)


class EvalRun(BaseModel):
    suite: str
    agent: str
    cases: list[CaseScore]
    summary: Summary
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


def _grade_fix(suite: Suite, case: CaseMeta, ws: Path, score: CaseScore, timeout_s: float = 600.0) -> None:
    """After a patch: warpgrad's FD check, the case's independent grader, and the guard on the objective.

    The fix counts as verified only when both checks pass and the objective is unchanged; when the two
    checks disagree (or the grader cannot run) the case fails and `fix_disagreement` says why.
    """
    from ..tools.gradcheck import GradcheckArgs, check

    probe_src = suite.probe(str(case.id))
    score.fix_verified = False
    if not probe_src.is_file():
        score.fix_disagreement = f"the case has no hidden probe ({probe_src}): the fix cannot be graded"
        return
    dest = ws / GRADER_PROBE
    shutil.copy(probe_src, dest)
    try:
        after = check(GradcheckArgs(probe=GRADER_PROBE, record=False), ws)
    finally:
        dest.unlink(missing_ok=True)
    score.warpgrad_fix_check = bool(after.ok and after.passed)
    grader_passed, grader_why = run_independent_grader(suite, ws, probe_src, timeout_s=timeout_s)
    score.grader_fix_check = grader_passed
    if grader_passed is None:
        score.fix_disagreement = f"the independent grader could not judge the fix: {grader_why}"
    elif grader_passed != score.warpgrad_fix_check:
        score.fix_disagreement = (
            f"warpgrad's check {'passed' if score.warpgrad_fix_check else 'failed'} but the independent grader "
            f"{'passed' if grader_passed else 'failed'} ({grader_why})")
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
    score.fix_verified = bool(score.warpgrad_fix_check and grader_passed and score.objective_unchanged is True)


def run_independent_grader(suite: Suite, ws: Path, probe: Path, *, timeout_s: float = 600.0) -> tuple[bool | None, str]:
    """Run the suite's own FD checker (`graders/fdcheck.py`, never warpgrad's code) on `ws` with `probe`.

    Returns (passed, summary in words); passed is None when the grader is missing, crashed or printed no
    verdict.
    """
    from ..tools.child_process import run_process

    grader = suite.independent_grader()
    if grader is None:
        return None, f"{suite.root / 'graders' / 'fdcheck.py'} does not exist"
    argv = [sys.executable, str(grader), "--workspace", str(ws), "--probe", str(probe)]
    proc = run_process(argv, cwd=ws.parent, env=dict(os.environ), timeout_s=timeout_s, memory_mb=None,
                       tail_bytes=100_000)
    lines = [ln for ln in proc.stdout_tail.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = "\n".join(proc.stderr_tail.strip().splitlines()[-5:])
        return None, f"{grader.name} {proc.describe()}: {tail}"
    try:
        verdict = GraderVerdict.model_validate_json(lines[-1])
    except ValueError as e:
        return None, f"{grader.name} printed no verdict: {e}"
    return verdict.passed, (f"{grader.name}: signature {verdict.signature}, max_rel_error {verdict.max_rel_error!r}")


class GraderVerdict(BaseModel):
    """The last JSON line the independent grader prints."""

    passed: bool
    signature: str | None = None
    max_rel_error: float | None = None


ENTRY_NAMES = ("train.py", "main.py", "run.py", "sim.py", "optimize.py")


def find_entry(case: CaseMeta, ws: Path) -> str | None:
    """The script the autopilot runs: the case's `entry`, else the one staged script a user would run.

    A published suite names no entry: one Python file is it; among several, a conventional name at the top
    of the workspace, else the only one with a `__main__` guard. None when that leaves a choice.
    """
    if case.entry:
        return case.entry
    scripts = sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*.py") if "__pycache__" not in p.parts)
    if len(scripts) == 1:
        return scripts[0]
    named = [n for n in ENTRY_NAMES if n in scripts]
    if named:
        return named[0]
    mains = [s for s in scripts if "__main__" in (ws / s).read_text(encoding="utf-8", errors="replace")]
    return mains[0] if len(mains) == 1 else None


def _autopilot_answer(r) -> str:
    """What the autopilot says, in the words a judge reads: the summary, the verdict and the top hypotheses."""
    lines = [r.summary or "", f"Signature: {r.signature}" + (f" (factor {r.factor:g})" if r.factor else "")]
    if r.blocked:
        lines.append(f"Blocked: {r.blocked}")
    for h in r.hypotheses[:3]:
        where = f" at {h.file}:{h.line}" if h.file and h.line else ""
        lines.append(f"{h.rank}. {h.title}{where}")
    return "\n".join(line for line in lines if line)


def run_autopilot(case: CaseMeta, ws: Path, score: CaseScore) -> None:
    from ..tools.diagnose import DiagnoseArgs, run_diagnose

    entry = find_entry(case, ws)
    if entry is None:
        raise ValueError(f"case {case.id} names no entry script and its files do not single one out: "
                         "autopilot has nothing to diagnose")
    r = run_diagnose(DiagnoseArgs(script=entry, timeout_s=120), ws)
    (ws.parent / f"{ws.name}.diagnose.json").write_text(r.model_dump_json(indent=2), encoding="utf-8")
    score.verdict = _verdict(r.gradients_wrong) if r.ok else None
    score.signature = r.signature if r.ok else None
    score.root_cause_rank = _root_cause_rank(case, [(h.file, h.line) for h in r.hypotheses])
    score.triggered = True
    score.answer = _autopilot_answer(r)


def _ledger_grading(case: CaseMeta, ws: Path, score: CaseScore) -> None:
    """Verdict, signature and root cause of a model-driven session, read from its ledger."""
    from ..tools.gate import check_finish
    from ..tools.ledger import Ledger
    from ..tools.records import FinishEvent, GradcheckEvent

    records = Ledger(ws).records()
    checks = [r.event.payload for r in records if isinstance(r.event, GradcheckEvent) and r.event.payload.ok]
    if checks:
        first = checks[0]
        score.verdict = _verdict(None if first.passed is None else not first.passed)
        score.signature = first.signature
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
    finishes = [r.event.payload for r in records if isinstance(r.event, FinishEvent)]
    if finishes:
        outcome = finishes[-1].outcome
        score.gate_satisfied = isinstance(outcome, str) and bool(outcome) and check_finish(ws, outcome).accepted
    score.triggered = any(r.kind in ("gradcheck", "diagnose", "tracker") for r in records)


def run_claude(case: CaseMeta, ws: Path, score: CaseScore, model: str | None) -> None:
    from ..agent.chat import make_client
    from ..agent.loop import Agent, AgentConfig

    config = AgentConfig(model=model) if model else AgentConfig()
    agent = Agent(make_client(), config, ws)
    score.answer = agent.run(case.prompt)
    score.tool_calls = int(agent.totals.get("steps", 0))
    score.tokens = int(agent.totals.get("input_tokens", 0) + agent.totals.get("output_tokens", 0))
    _ledger_grading(case, ws, score)


def run_replay(case: CaseMeta, ws: Path, score: CaseScore, recorded: Path) -> None:
    from ..agent.chat import replay

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
    suite.stage(case, ws)
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
        if case.expected_signature == Signature.INCONCLUSIVE:
            # "FD cannot judge this as it stands" is the right verdict when the case is built so it cannot.
            score.verdict_right = score.signature == Signature.INCONCLUSIVE or score.verdict == score.expected_verdict
        elif score.expected_verdict:
            score.verdict_right = score.verdict == score.expected_verdict
        if score.expected_signature and score.signature:
            score.signature_right = score.signature == score.expected_signature
        if case.expected_verdict == "gradients_wrong":
            score.root_cause_top3 = score.root_cause_rank is not None and score.root_cause_rank <= 3
        if score.patched:
            _grade_fix(suite, case, ws, score)
    if not suite.graded:
        _judge(case, score)
    score.wall_s = round(time.monotonic() - t, 2)
    after = _hashes(ws)
    missing = sorted(set(staged) - set(after))
    if missing:
        score.no_harm, score.harm = False, [f"deleted {m}" for m in missing]
    if source_before and _hashes(suite.workspace(str(case.id))) != source_before:
        score.no_harm = False
        score.harm.append("changed the suite's own fixture (a write outside the workspace)")
    return score


def _judge(case: CaseMeta, score: CaseScore) -> None:
    """Grade a case of a suite with no graders: an LLM judge over its assertions, or say it is ungraded."""
    if not os.environ.get("ANTHROPIC_API_KEY"):
        j = ungraded(case, "ungraded: no grader ships with this suite and ANTHROPIC_API_KEY is not set for the "
                           "LLM judge; the answer is listed beside the assertions")
    elif score.answer is None:
        j = ungraded(case, "ungraded: the agent gave no answer to judge")
    else:
        import anthropic

        j = judge(case, score.answer, anthropic.Anthropic())
    _apply_judgement(score, j)


def _apply_judgement(score: CaseScore, j: Judgement) -> None:
    score.graded_by = "judge" if j.graded else "ungraded"
    score.assertions, score.judge_note = j.grades, j.note


def _child(suite_dir: Path, case_id: str, agent: str, out: Path, timeout_s: float, model: str | None) -> CaseScore:
    from ..tools.child_process import run_process

    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    result = out / "scores" / f"{case_id}.json"
    result.parent.mkdir(parents=True, exist_ok=True)
    result.unlink(missing_ok=True)
    env = dict(os.environ)
    env["WARP_CACHE_PATH"] = str(out / "kernel-cache" / case_id)  # one cache per case: no concurrent compiles
    argv = [sys.executable, "-m", "warpgrad.evals.run_cases", "--one", case_id, "--suite", str(suite_dir), "--agent", agent,
            "--out", str(out)] + (["--model", model] if model else [])
    proc = run_process(argv, cwd=out, env=env, timeout_s=timeout_s, memory_mb=None, tail_bytes=200_000)
    log = logs / f"{case_id}.log"
    log.write_text(f"$ {' '.join(argv)}\n--- stdout\n{proc.stdout_tail}\n--- stderr\n{proc.stderr_tail}\n",
                   encoding="utf-8")
    if result.is_file():
        score = CaseScore.model_validate_json(result.read_text(encoding="utf-8"))
    else:
        suite = load_suite(suite_dir)
        case = suite.case(case_id)
        score = CaseScore(id=case_id, should_trigger=case.should_trigger, expected_verdict=case.expected_verdict,
                          expected_signature=case.expected_signature,
                          error=f"the case {proc.describe()}; see {log}", wall_s=proc.wall_s)
        if not suite.graded:
            _apply_judgement(score, ungraded(case, f"ungraded: the case {proc.describe()}"))
        if case.expected_verdict == "gradients_wrong":
            score.root_cause_top3 = False
        if case.should_trigger:
            score.verdict_right = score.signature_right = False
    score.log = str(log)
    return score


def _pct(xs: list[bool | None]) -> float | None:
    """Percentage of True over EVERY entry: an unattempted (None) or crashed case counts as a failure."""
    return round(100.0 * sum(x is True for x in xs) / len(xs), 1) if xs else None


def _best_constant(expected: list[str | None]) -> tuple[float | None, str]:
    """What always giving the most common expected answer scores."""
    if not expected:
        return None, "no cases"
    counts: dict[str, int] = {}
    for e in expected:
        if e is not None:
            counts[e] = counts.get(e, 0) + 1
    if not counts:
        return 0.0, "no expected answer"
    answer = max(sorted(counts), key=lambda k: counts[k])
    return round(100.0 * counts[answer] / len(expected), 1), f"always '{answer}'"


def summarize(scores: list[CaseScore]) -> Summary:
    """Every percentage counts every case it applies to; each has the best constant answer beside it."""
    pos = [s for s in scores if s.should_trigger]
    wrong = [s for s in pos if s.expected_verdict == "gradients_wrong"]
    neg = [s for s in scores if not s.should_trigger]
    v_base, v_answer = _best_constant([s.expected_verdict for s in pos])
    s_base, s_answer = _best_constant([s.expected_signature for s in pos])
    lines = [
        ScoreLine(name="verdict right", cases=len(pos), value_pct=_pct([s.verdict_right for s in pos]),
                  baseline_pct=v_base, baseline=v_answer),
        ScoreLine(name="signature right", cases=len(pos), value_pct=_pct([s.signature_right for s in pos]),
                  baseline_pct=s_base, baseline=s_answer),
        ScoreLine(name="root cause in top 3", cases=len(wrong), value_pct=_pct([s.root_cause_top3 for s in wrong]),
                  baseline_pct=0.0 if wrong else None, baseline="name no location"),
        ScoreLine(name="fix verified", cases=len(wrong), value_pct=_pct([s.fix_verified for s in wrong]),
                  baseline_pct=0.0 if wrong else None, baseline="patch nothing"),
        ScoreLine(name="gate satisfied", cases=len(pos), value_pct=_pct([s.gate_satisfied for s in pos]),
                  baseline_pct=0.0 if pos else None, baseline="finish without evidence"),
        ScoreLine(name="negatives not triggered", cases=len(neg),
                  value_pct=_pct([None if s.triggered is None else not s.triggered for s in neg]),
                  baseline_pct=100.0 if neg else None, baseline="never take a task on"),
        ScoreLine(name="no harm", cases=len(scores), value_pct=_pct([s.no_harm for s in scores]),
                  baseline_pct=100.0 if scores else None, baseline="do nothing"),
    ]
    judged = [s for s in scores if s.graded_by == "judge"]
    if judged:
        lines.append(ScoreLine(
            name="assertions all passed (LLM judge)", cases=len(judged),
            value_pct=_pct([bool(s.assertions) and all(a.passed is True for a in s.assertions) for s in judged]),
            baseline_pct=0.0, baseline="answer nothing"))
    patched = [s for s in scores if s.patched]
    return Summary(
        cases=len(scores), positive=len(pos), negative=len(neg), scores=lines,
        objective_changed=[s.id for s in patched if s.objective_unchanged is False],
        objective_unchanged=sum(s.objective_unchanged is True for s in patched), patched=len(patched),
        fix_disagreements=[f"{s.id}: {s.fix_disagreement}" for s in scores if s.fix_disagreement],
        crashed_or_timed_out=[s.id for s in scores if s.error],
        ungraded=[s.id for s in scores if s.graded_by == "ungraded"],
        median_wall_s=sorted(s.wall_s for s in scores)[len(scores) // 2] if scores else None,
    )


def scoreboard(run: EvalRun) -> str:
    s = run.summary

    def mark(v: bool | None) -> str:
        return "—" if v is None else ("yes" if v else "**no**")

    def pct(v: float | None) -> str:
        return "—" if v is None else f"{v}%"

    lines = [f"# warpgrad eval: {run.agent}", "", (f"suite `{run.suite}`, {s.cases} cases ({s.positive} positive, "
             f"{s.negative} negative), {run.wall_s:.0f} s wall"), "",
             ("Every percentage is over all the cases it applies to: a case not attempted, or one that crashed or "
             "timed out, counts as a failure. The baseline is what the best constant answer scores."), "",
             "| score | value | cases | constant-answer baseline |", "|---|---|---|---|"]
    for line in s.scores:
        lines.append(f"| {line.name} | {pct(line.value_pct)} | {line.cases} | {pct(line.baseline_pct)} "
                     f"({line.baseline}) |")
    lines += ["", (f"Objective unchanged by the patch: {s.objective_unchanged} of {s.patched} patched cases"
                   + (f"; **changed** in {', '.join(s.objective_changed)} (not a verified fix)"
                      if s.objective_changed else "") + ".")]
    if s.fix_disagreements:
        lines += ["", "**Fix checks that disagree (the case fails):**", ""]
        lines += [f"- {d}" for d in s.fix_disagreements]
    if s.crashed_or_timed_out:
        lines += ["", f"Crashed or timed out (counted as failures): {', '.join(s.crashed_or_timed_out)}."]
    lines += ["", ("| case | verdict (expected) | signature (expected) | root cause rank | fix verified "
                   "(warpgrad / grader) | harm | s |"),
              "|---|---|---|---|---|---|---|"]
    for c in run.cases:
        verdict = f"{c.verdict or '—'} ({c.expected_verdict or '—'})"
        sig = f"{c.signature or '—'} ({c.expected_signature or '—'})"
        err = f" error: {c.error[:60]}" if c.error else ""
        fix = mark(c.fix_verified)
        if c.patched:
            fix += f" ({mark(c.warpgrad_fix_check)} / {mark(c.grader_fix_check)})"
        lines.append(f"| {c.id} | {mark(c.verdict_right)} {verdict} | {mark(c.signature_right)} {sig} | "
                     f"{c.root_cause_rank or '—'} | {fix} | {'none' if c.no_harm else '; '.join(c.harm)} "
                     f"| {c.wall_s:.0f}{err} |")
    lines += _answers_section(run)
    return "\n".join(lines) + "\n"


def _answers_section(run: EvalRun) -> list[str]:
    """For a suite with no graders: each case's answer beside its assertions, graded by the judge or not."""
    shown = [c for c in run.cases if c.graded_by != "graders"]
    if not shown:
        return []
    lines = ["", "## Answers beside assertions", ""]
    if run.summary.ungraded:
        note = next(c.judge_note for c in shown if c.graded_by == "ungraded")
        lines += [f"**Ungraded** ({len(run.summary.ungraded)} cases): {note or ''}".rstrip(), ""]
    for c in shown:
        lines += [f"### {c.id}" + ("" if c.should_trigger else " (negative: should not trigger)"), "",
                  "Answer:", "", *[f"> {line}" for line in (c.answer or "(no answer)").splitlines()[:20]], ""]
        for a in c.assertions:
            mark = {True: "pass", False: "**fail**", None: "ungraded"}[a.passed]
            lines.append(f"- [{mark}] {a.assertion}" + (f" — {a.why}" if a.why else ""))
        lines.append("")
    return lines


def run_suite(suite_dir: Path, agent: str, out: Path, *, cases: list[str] | None = None, jobs: int = 2,
              timeout_s: float = 900.0, model: str | None = None,
              progress: Callable[[int, int, CaseScore], None] | None = None,
              planned: Callable[[int], None] | None = None) -> EvalRun:
    """Run `agent` over the suite's cases (`jobs` at a time, each in its own subprocess) and grade them.

    `planned(total)` is called once the cases to run are known, before the first starts (a terminal shows 0/N
    from the start, not nothing until the first case ends); `progress(done, total, score)` as each case
    finishes, in the order they finish."""
    suite = load_suite(Path(suite_dir).resolve())  # the per-case children run in `out`, not here
    ids = [str(c.id) for c in suite.cases]
    if cases:
        unknown = sorted(set(cases) - set(ids))
        if unknown:
            raise ValueError(f"unknown case ids: {', '.join(unknown)}")
        ids = [i for i in ids if i in cases]
    out.mkdir(parents=True, exist_ok=True)
    if planned is not None:
        planned(len(ids))
    t = time.monotonic()
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = [pool.submit(_child, suite.root, cid, agent, out, timeout_s, model) for cid in ids]
        for done, future in enumerate(as_completed(futures), 1):
            if progress is not None:
                progress(done, len(ids), future.result())
        scores = [f.result() for f in futures]
    run = EvalRun(suite=str(suite.root), agent=agent, cases=scores, summary=summarize(scores),
                  wall_s=round(time.monotonic() - t, 1))
    (out / "results.json").write_text(run.model_dump_json(indent=2), encoding="utf-8")
    (out / "scoreboard.md").write_text(scoreboard(run), encoding="utf-8")
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m warpgrad.evals.run_cases")
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
