"""`diagnose`: the whole measured pipeline without an LLM.

1. run the script (a script that cannot run is the finding: report the blocker and stop); the plain run
   ends once its printed loss shows its trend, unless `full_run`;
2. the end-to-end FD check (capture) gives the signature;
3. tape inspection: the recorded launches, their reads and writes, hazards, NaN origin, from the FD
   check's capture run (1 and 2-3 run side by side: neither needs the other's result);
4. the quick-check rules over every workspace module the run imported;
5. the overwrite tracker, parsed, when it has something to confirm: the FD check finds the gradient wrong
   or gives no verdict, or a rule reports an overwrite the tracker can see;
6. horizon bisection when the evidence is still ambiguous;
7. the signature table ranks every finding; the report leads with the most likely cause.

Every stage is also a tool of its own; diagnose only orders them and weighs their evidence.
"""

from __future__ import annotations

import ast
import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from . import progress
from .child_process import HarnessOutcome, run_harness
from .failing_path import FailingPaths
from .gradcheck import CaptureRider, GradcheckArgs, GradcheckResult, check, check_capture
from .harness.protocol import (
    LOCALIZE_LISTENER,
    TAPE_ITERATIONS_LISTENER,
    TREND_STOP_LISTENER,
    CaptureConfig,
    CaptureOptions,
    CaptureResult,
    HarnessResult,
    LocalizeOptions,
    RunConfig,
    TapeInspectOptions,
)
from .horizon import BisectArgs, BisectResult, bisect_horizon
from .ledger import Ledger
from .losses import summarize
from .quickchecks.base import Finding
from .quickchecks.engine import run_rules
from .ready_fix import ReadyFix, mark_partial, ready_fix
from .registry import CliCommand, FileOutput, tool
from .render import diagnose_text
from .run_script import RunScriptResult, describe_run
from .signatures import TABLE, Signature
from .tape import InspectTapeResult, LaunchCheck, describe_inspection, inspect
from .tracker import InstrumentResult, run_tracker
from .workflow import fix_workflow
from .workspace import rel_path, resolve_path

Progress = Callable[[str], None]


class DiagnoseArgs(BaseModel):
    script: str = Field(description="Workspace-relative path of the training script (the entry point).")
    args: list[str] = Field(default_factory=list, description="Arguments passed to the script (sys.argv[1:]).")
    iteration: int | None = Field(None, ge=0, description="Training iteration to check (default: the second).")
    params: list[str] = Field(default_factory=list, description="Parameters to check, when capture cannot tell.")
    objective: str | None = Field(None, description="Variable to difference instead of the seeded loss.")
    bisect: Literal["auto", "always", "never"] = Field("auto", description="Horizon bisection: 'auto' runs it only "
                                                      "when the other evidence does not point at a cause.")
    device: Literal["cpu"] | None = Field(None, description="'cpu' forces Warp onto the CPU.")
    timeout_s: float = Field(300.0, gt=0, le=3600, description="Wall-clock limit of each run of the script.")
    record: bool = Field(True, description="Append every stage's result to the evidence ledger.")
    full_run: bool = Field(False, description="Run the script to its end for the loss trajectory (default: stop the "
                           "plain run once the printed loss shows its trend).")


class Evidence(BaseModel):
    source: str = Field(description="gradcheck | tracker | tape | rule | localization")
    detail: str


class Hypothesis(BaseModel):
    rank: int = 0
    title: str
    rule: str | None = Field(None, description="Quick-check rule id (WGnnn), hazard kind or tracker kind.")
    file: str | None = None
    line: int | None = None
    score: float = 0.0
    evidence: list[Evidence] = []
    reference: str | None = None
    next_check: str | None = None
    ready_fix: ReadyFix | None = Field(None, description="The rule hit's mechanical repair as one edit_file call, "
                                       "where it has one (tools/ready_fix.py).")


class DiagnoseResult(BaseModel):
    ok: bool = Field(description="The pipeline ran (False: the script cannot run; see `blocked`).")
    script: str
    gradients_wrong: bool | None = Field(None, description="True: AD disagrees with FD; False: it matches; None: no verdict.")
    signature: Signature = Signature.INCONCLUSIVE
    factor: float | None = None
    summary: str = ""
    blocked: str | None = Field(None, description="Why the script cannot run, when it cannot.")
    hypotheses: list[Hypothesis] = []
    ruled_out: list[str] = []
    next_steps: list[str] = []
    trajectory: dict[str, Any] = {}
    gradcheck: GradcheckResult | None = None
    tracker: InstrumentResult | None = Field(None, description="Warp's overwrite tracker; None when it had nothing "
                                             "to confirm (gradients verified, no overwrite finding) or did not run.")
    tape: InspectTapeResult | None = None
    findings: list[Finding] = []
    bisect: BisectResult | None = None
    run: RunScriptResult | None = None
    run_cut_short_at: int | None = Field(None, description="The plain run was stopped after the loss of this "
                                         "iteration was printed (its trend was read; `full_run` runs it to the end). "
                                         "None: it ran to the end.")
    timings: dict[str, float] = {}
    files: dict[str, str] = {}


# Weight of one piece of evidence, before the signature decides whether it is a plausible cause.
_TRACKER_WEIGHT = {"across_launches": 0.9, "copy": 0.9, "within_kernel": 0.8}
_HAZARD_WEIGHT = {"error": 0.85, "warning": 0.6, "info": 0.2}
_RULE_WEIGHT = {"high": 0.55, "medium": 0.4, "low": 0.25}
_COMPATIBLE, _INCOMPATIBLE = 1.0, 0.3


def _functions(path: Path) -> list[tuple[int, int]]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, OSError, UnicodeDecodeError):
        return []
    return [(n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


# Rules whose pattern is an overwrite of something an earlier read needs: the tracker's records of the kernel
# that holds such a hit are the same defect seen at run time, so they join the hit instead of standing beside it.
_OVERWRITE_RULES = frozenset({"WG005", "WG006", "WG007", "WG008", "WG017", "WG019"})
# Sources that are measurements of this run, as opposed to a pattern read from the source text.
_RUNTIME_SOURCES = frozenset({"gradcheck", "tracker", "tape", "localization"})


class _Ranker:
    """Scores and orders the hypotheses. The ranking rules, in the order they decide:

    | # | rule | why |
    |---|------|-----|
    | 1 | code in an installed package (site-packages, a venv) comes last, and is dropped unless localization (a failing launch, a NaN origin) puts the failure there | the user cannot patch it; a pattern matching inside it is context |
    | 2 | tier 0: a hypothesis with a quick-check rule id (WGnnn) AND runtime evidence (the failing launch's kernel path, a tape hazard at its line, a tracker record of its kernel or line, the NaN origin, the FD signature itself) | it names the line to change and the run shows that line failing |
    | 3 | tier 1: everything else (uncorroborated rule hits, tracker records, tape hazards, horizon bisection) | evidence without both a place and a measurement |
    | 4 | tier 2: a generic "kernel K fails gradcheck_tape in isolation", whenever some tier-0 hypothesis exists | a per-launch failure says which adjoint is wrong, not why; the corroborated rule hit says why |
    | 5 | within a tier: the score, then the measured per-launch error (max relative error; NaN counts as infinite) | |

    Scores: each piece of evidence has a weight (`_TRACKER_WEIGHT`, `_HAZARD_WEIGHT`, `_RULE_WEIGHT`, 0.7 for a
    failing launch), multiplied by 0.3 when the signature table says the pattern does not produce the measured
    signature (a rule's own declared signatures count as compatible), +0.1 when the line ran on the tape;
    the pieces at one place combine as independent chances (1 - prod(1 - w)).

    A per-launch failure of a kernel with no rule hit inside it is ONE hypothesis per kernel, however many
    launch sites or tapes repeat it (one evidence line with the count, no score inflation from repetition); such
    hypotheses order among themselves by their measured error.
    """

    def __init__(self, workspace: Path, signature: Signature, wrong: bool | None, modules: list[str] | None = None) -> None:
        self.ws = workspace
        # The workspace modules the run imported: a kernel launched in train.py is often defined in another
        # of them (kernels.py), and its failing path starts at its definition.
        self.modules = list(modules or [])
        self.row = TABLE.get(signature, TABLE[Signature.INCONCLUSIVE])
        self.wrong = wrong
        self.by_loc: dict[tuple, Hypothesis] = {}
        self.scores: dict[tuple, list[float]] = {}
        self.taped_sites: set[tuple[str, int]] = set()
        self._fn_cache: dict[str, list[tuple[int, int]]] = {}
        self.paths = FailingPaths(workspace)
        self.on_failing_path: set[tuple[str | None, int | None]] = set()
        self.signature = signature
        self.launch_error: dict[int, float] = {}  # id(generic per-launch hypothesis) -> its worst measured error

    def compat(self, key: str, family: str, declared: list[Signature] | None = None) -> float:
        """`declared`: the signatures a rule says it produces (its docs); the table row is the other source."""
        pool = {"rule": self.row.rules, "tape": self.row.hazards, "tracker": self.row.tracker}[family]
        if self.wrong is False:
            return 0.15  # gradients verified: every pattern is at most an incidental smell
        return _COMPATIBLE if key in pool or self.signature in (declared or []) else _INCOMPATIBLE

    def library(self, file: str | None) -> bool:
        """The file belongs to installed code rather than the user's workspace."""
        if not file:
            return False
        parts = Path(file).parts
        if any(p in ("site-packages", "dist-packages", ".venv", "venv") for p in parts):
            return True
        path = Path(file)
        return path.is_absolute() and not path.resolve().is_relative_to(self.ws.resolve())

    def executed(self, file: str | None, line: int | None) -> bool:
        """The location is a taped launch site or inside a function that made one."""
        if not file or line is None:
            return False
        if (file, line) in self.taped_sites:
            return True
        fns = self._fn_cache.setdefault(file, _functions(self.ws / file))
        spans = [s for s in fns if s[0] <= line <= s[1]]
        if not spans:
            return False
        lo, hi = min(spans, key=lambda s: s[1] - s[0])
        return any(f == file and lo <= ln <= hi for f, ln in self.taped_sites)

    def _on_path(self, h: Hypothesis) -> bool:
        return (h.file, h.line) in self.on_failing_path or (self.wrong is True and self.executed(h.file, h.line))

    def add(self, title: str, key: str | None, file: str | None, line: int | None, weight: float, ev: Evidence,
            reference: str | None = None, next_check: str | None = None) -> Hypothesis:
        loc = (file, line, key) if file and line else (title, key)
        if file and line:
            for other in self.by_loc:
                if len(other) == 3 and other[0] == file and other[1] is not None and abs(other[1] - line) <= 1:
                    loc = other  # the same place seen by two sources: one hypothesis, stronger
                    break
        h = self.by_loc.get(loc)
        if h is None:
            h = self.by_loc[loc] = Hypothesis(title=title, rule=key, file=file, line=line, reference=reference,
                                              next_check=next_check)
            self.scores[loc] = []
        h.evidence.append(ev)
        if self.executed(file, line):
            weight = min(1.0, weight + 0.1)
        self.scores[loc].append(weight)
        return h

    def corroborated(self, h: Hypothesis) -> bool:
        """A rule id backed by a measurement of this run (tier 0 of the ranking)."""
        if not (h.rule and h.rule.startswith("WG")):
            return False
        return self._on_path(h) or any(e.source in _RUNTIME_SOURCES for e in h.evidence)

    def ranked(self) -> list[Hypothesis]:
        out = []
        for loc, h in self.by_loc.items():
            miss = 1.0
            for s in self.scores[loc]:
                miss *= 1.0 - s
            h.score = round(1.0 - miss, 4)
            out.append(h)
        # Library code (an installed package, a venv) is context, not a suspect: a user cannot and should not
        # patch it. Only where localization (a failing launch, a NaN origin) puts the failure there is it a
        # hypothesis at all; a pattern that merely matches inside it is dropped.
        out = [h for h in out if not self.library(h.file) or any(e.source == "localization" for e in h.evidence)]
        # A rule hit on the failing path (inside a failing kernel, or on a taped line of a wrong gradient)
        # names the line to change: a generic "this kernel fails" outranks none of them, whatever the weights.
        tier0 = [h for h in out if self.corroborated(h)]

        def tier(h: Hypothesis) -> int:
            if h.rule == "kernel_adjoint":
                return 2 if tier0 else 1
            return 0 if h in tier0 else 1

        out.sort(key=lambda h: (self.library(h.file), tier(h), -h.score, -self.launch_error.get(id(h), 0.0)))
        for i, h in enumerate(out, 1):
            h.rank = i
        return out


def _signature_hypotheses(rk: _Ranker, gc: GradcheckResult, script: str) -> None:
    """Hypotheses the FD evidence implies by itself (a location comes from rules/hazards that agree)."""
    sig = gc.signature
    if gc.stale_read:
        rk.add("the update applies a gradient read before this iteration's backward (a stale read)", "WG015", None,
               None, 0.8, Evidence(source="gradcheck", detail="; ".join(p.how or "" for p in gc.params)),
               "references/quick-checks.md", "read the gradient after tape.backward() and before the update")
    if sig == Signature.GROWS_ACROSS_ITERATIONS:
        rk.add("gradients accumulate across iterations (not zeroed before backward)", "WG003", None, None, 0.7,
               Evidence(source="gradcheck", detail=gc.explanation), TABLE[sig].reference, TABLE[sig].next_check)
    elif sig == Signature.TRUNCATION:
        rk.add("backward per step: each tape covers part of the horizon (gradient truncation)", "WG004", None, None, 0.8,
               Evidence(source="gradcheck", detail=gc.explanation), TABLE[sig].reference, TABLE[sig].next_check)
    elif sig == Signature.EXACT_FACTOR and gc.reported_factor is not None:
        rk.add("the backward seed does not match the reported objective (sum seeded, mean reported)", "WG016", None,
               None, 0.8, Evidence(source="gradcheck", detail=gc.explanation), TABLE[sig].reference,
               TABLE[sig].next_check)
    elif sig == Signature.INCONCLUSIVE and gc.nondeterministic:
        rk.add("the forward is not deterministic: FD cannot judge the gradient until the noise is pinned", None,
               script, None, 0.6, Evidence(source="gradcheck", detail=gc.reason), "references/verification.md",
               "seed every random source (np.random.default_rng(seed), wp.rand_init(seed, ...)) and rerun gradcheck")
    elif sig == Signature.INCONCLUSIVE and gc.fd_unresolvable:
        rk.add("the objective's float32 rounding swamps the perturbation (cancellation)", None, script, None, 0.6,
               Evidence(source="gradcheck", detail=gc.reason), "references/verification.md",
               "subtract the constant part of the loss or accumulate it in float64, then rerun gradcheck")


def _launch_error(lc: LaunchCheck) -> float:
    """The check's worst measured error: max relative error over its rows; a NaN adjoint is infinitely wrong."""
    if lc.status == "nan" or any(r.passed == "NaN" for r in lc.rows):
        return float("inf")
    return max((r.max_rel_error for r in lc.rows if r.passed != "PASS"), default=0.0)


def _launch_failures(rk: _Ranker, findings: list[Finding], failed: list[LaunchCheck]) -> None:
    """Kernels that fail gradcheck_tape alone: evidence for the rule hits inside them (or in what they call),
    which name the line to change; a generic hypothesis of its own only where no rule hit explains it, one per
    kernel however many launch sites and tapes repeat the failure (ranked by its worst measured error)."""
    by_kernel: dict[str, list[LaunchCheck]] = {}
    for lc in failed:
        by_kernel.setdefault(lc.kernel, []).append(lc)
    for kernel, checks in by_kernel.items():
        first = checks[0]
        # A check stands for every launch of its class: the sites it was not made at are named too.
        sites = list(dict.fromkeys(s for lc in checks for s in ([f"{lc.file}:{lc.line}"] if lc.file else []) + lc.also_at))
        err = max(_launch_error(lc) for lc in checks)
        detail = (f"per-launch gradcheck_tape failed for {kernel}" +
                  (f" (launched at {', '.join(sites[:3])}{' and more' if len(sites) > 3 else ''})" if sites else "") +
                  (f", {len(checks)} checks" if len(checks) > 1 else "") + f"; worst relative error {err:.3g}")
        ev = Evidence(source="localization", detail=detail)
        files = list(dict.fromkeys([*(lc.file for lc in checks if lc.file), *rk.modules]))
        inside = [f for f in findings if rk.paths.on_path(kernel, files, f.path, f.line)]
        for f in inside:
            rk.add(f"{f.code} {f.name}", f.code, f.path, f.line, 0.7, ev, f.reference)
            rk.on_failing_path.add((f.path, f.line))
        if not inside:
            h = rk.add(f"kernel {kernel} fails gradcheck_tape in isolation (its own adjoint is wrong)",
                       "kernel_adjoint", first.file, first.line, 0.7, ev,
                       "references/custom-gradients.md", "check the kernel's custom adjoint or non-differentiable op")
            rk.launch_error[id(h)] = err


def _rank(ws: Path, res: DiagnoseResult) -> None:
    gc = res.gradcheck
    sig = gc.signature if gc else Signature.INCONCLUSIVE
    rk = _Ranker(ws, sig, res.gradients_wrong, sorted(res.files))
    tape = res.tape
    if tape and tape.ok:
        for td in tape.tapes:
            for ln in td.launches:
                if ln.file and ln.line:
                    rk.taped_sites.add((ln.file, ln.line))
    if gc and gc.ok:
        _signature_hypotheses(rk, gc, res.script)
    if res.tracker and res.tracker.ok:
        for r in res.tracker.records:
            what = f"{r.array or r.argument or 'an array'} written after it was read"
            where = {"across_launches": f"by kernel {r.kernel} in a later launch", "copy": "by wp.copy",
                     "within_kernel": f"inside kernel {r.kernel}"}[r.kind]
            weight = _TRACKER_WEIGHT[r.kind] * rk.compat(r.kind, "tracker")
            ev = Evidence(source="tracker", detail=f"Warp's tracker: {r.kind.replace('_', ' ')}, kernel {r.kernel}, "
                          f"argument {r.argument}" + (f", read earlier at {r.read_by.file}:{r.read_by.line}"
                                                      if r.read_by and r.read_by.file else "") + f" ({r.count}x)")
            # The tracker names the writing kernel's launch; an overwrite rule hit inside that kernel names the
            # statement that writes. Same defect: the record is evidence for the hit, not a hypothesis beside it.
            inside = [f for f in res.findings if f.code in _OVERWRITE_RULES and r.kernel and r.file
                      and rk.paths.on_path(r.kernel, [r.file, *rk.modules], f.path, f.line)]
            for f in inside:
                rk.add(f"{f.code} {f.name}", f.code, f.path, f.line, weight, ev, f.reference)
            if not inside:
                rk.add(f"overwrite: {what} {where}", r.kind, r.file, r.line, weight, ev, "references/quick-checks.md §1",
                       "give each step its own buffer (or clone before overwriting) and rerun")
    if tape and tape.ok:
        for h in tape.hazards:
            rk.add(h.message.split(". ")[0][:160], h.rule or h.kind, h.file, h.line,
                   _HAZARD_WEIGHT[h.severity] * max(rk.compat(h.kind, "tape"), rk.compat(h.rule or "", "rule")),
                   Evidence(source="tape", detail="; ".join([h.message, *h.evidence])[:600]),
                   None, None)
        for td in tape.tapes:
            no = td.nan_origin
            if no and no.nonfinite_adjoints and (no.file or no.forward_file):
                file, line = (no.file, no.line) if no.file else (no.forward_file, no.forward_line)
                rk.add(f"NaN/inf adjoint first produced by kernel {no.kernel or no.forward_kernel}", "nan_origin", file,
                       line, 0.9 if sig == Signature.NAN_INF else 0.4,
                       Evidence(source="localization", detail=f"first launch in backward order whose adjoints turn "
                                f"non-finite: {no.kernel} at {file}:{line} (arrays {', '.join(no.arrays)})"),
                       "references/quick-checks.md §9a", TABLE[Signature.NAN_INF].next_check)
    for f in res.findings:
        w = _RULE_WEIGHT[f.confidence] * rk.compat(f.code, "rule", f.signatures)
        rk.add(f"{f.code} {f.name}", f.code, f.path, f.line, w, Evidence(source="rule", detail=f.message), f.reference,
               TABLE[sig].next_check if f.code in TABLE[sig].rules else None)
    if tape and tape.ok:
        _launch_failures(rk, res.findings, [lc for td in tape.tapes for lc in td.gradcheck if lc.passed is False])
    if res.bisect and res.bisect.ok and res.bisect.first_failing:
        b = res.bisect
        rk.add(f"the disagreement starts at horizon {b.first_failing}", "horizon", res.script, b.knob_line, 0.3,
               Evidence(source="localization", detail=b.conclusion), "references/verification.md", None)
    # Signature-level hypotheses without a location borrow the best matching rule finding's place.
    hyps = rk.ranked()
    located = {hyp.rule: hyp for hyp in hyps if hyp.file and hyp.line}
    for hyp in hyps:
        if not hyp.line and hyp.rule in located:
            src = located[hyp.rule]
            hyp.file, hyp.line = src.file, src.line
    res.hypotheses = [hyp for hyp in hyps if hyp.score >= 0.05][:12]


def _ruled_out(res: DiagnoseResult) -> list[str]:
    out = []
    gc = res.gradcheck
    if gc and gc.ok:
        if not gc.rerun_mismatch and not gc.nondeterministic:
            out.append("a stochastic forward: an unperturbed rerun reproduced the objective exactly")
        if gc.signature != Signature.GROWS_ACROSS_ITERATIONS and (gc.iteration or 0) >= 1:
            out.append(f"gradient accumulation across iterations: no parameter gradient was left nonzero before "
                       f"iteration {gc.iteration}'s backward")
        if (gc.backward_calls or 1) == 1:
            out.append("tape-per-step truncation: one backward call feeds each update")
        if gc.printed_vs_seeded == "same":
            out.append("a seed/objective mismatch: the printed loss equals the loss seeded into backward")
        if not any(p.nonfinite for p in gc.params):
            out.append("NaN/inf in the gradient")
    if res.tracker and res.tracker.ok and res.tracker.clean:
        out.append("write-after-read overwrites that Warp's tracker can see (across launches, within kernels, by "
                   "wp.copy); its blind spots (struct fields, left-operand reads, *=) are covered by tape inspection")
    tape = res.tape
    if tape and tape.ok:
        kinds = {h.kind for h in tape.hazards}
        for kind, text in (
            ("chain_cut_requires_grad", "an array without requires_grad cutting the chain"),
            ("chain_cut_backward_disabled", "a backward-disabled kernel on the tape"),
            ("recorded_twice", "a launch recorded twice"),
            ("write_after_read", "write-after-read on the recorded tape (struct fields and aliases included)"),
            ("mutated_before_backward", "an array mutated between its recording and backward"),
        ):
            if kind not in kinds:
                out.append(f"{text}: none on the tape of iteration {tape.iteration}")
    return out


def _summary(res: DiagnoseResult) -> str:
    if res.blocked:
        return f"the script cannot run: {res.blocked}"
    gc = res.gradcheck
    top = res.hypotheses[0] if res.hypotheses else None
    where = f" at {top.file}:{top.line}" if top and top.file and top.line else ""
    if res.gradients_wrong and gc is not None and gc.tape_gradient_passed:
        # Both facts: the tape computes the right gradient; the update applies another one.
        applied = ("is stale (read before this iteration's backward, or kept from an earlier one)" if gc.stale_read
                   else "is another one (the host sums reads of a .grad that already holds the earlier passes)")
        s = (f"the tape's gradient is right (it matches finite differences), but the gradient the update applies "
             f"{applied}: {res.signature}")
        return s + (f"; most likely cause: {top.title}{where}" if top else "; no cause located yet")
    if res.gradients_wrong:
        s = f"gradients are WRONG ({res.signature}"
        s += f", factor {res.factor:g})" if res.factor is not None else ")"
        return s + (f"; most likely cause: {top.title}{where}" if top else "; no cause located yet")
    if res.gradients_wrong is False:
        t = res.trajectory.get("trend")
        extra = {"diverging": "; the loss diverges with correct gradients: the step size (learning rate) is too "
                              "large for this system, or the physics is unstable",
                 "oscillating": "; the loss oscillates with correct gradients: lower the learning rate",
                 "flat": "; the loss stalls with correct gradients: a plateau, a too-small learning rate, or a "
                         "piecewise-constant objective"}.get(t or "", "")
        if gc is not None and gc.forward_nonfinite:
            return "not a gradient bug: " + gc.explanation
        if res.signature == Signature.ZERO:
            return ("the gradient is exactly zero and so is the objective's local slope: a piecewise-constant forward, "
                    "where zero is the true gradient (use a surrogate such as a straight-through estimator)")
        return "gradients match finite differences at the full horizon: not a gradient bug" + extra
    return f"no verdict on the gradients: {gc.reason if gc else 'the FD check did not run'}"


_CHECKS_NOT_NEEDED = ("not run: the FD check found the gradient correct, and a correct gradient needs no "
                      "localization")


# Rules whose finding is an array written after a launch read it in a way Warp's overwrite tracker can see
# (a rebinding ping-pong, wp.copy onto a read array, a ptr= alias, a retain_grad array written twice): the
# tracker can confirm or refute them. Struct fields, `*=` and local vector components are its blind spots.
_TRACKER_CONFIRMS = frozenset({"WG005", "WG006", "WG017", "WG018"})


class _Stages:
    """One diagnose: the inputs every stage reads, the result they fill, and the timing of each."""

    def __init__(self, args: DiagnoseArgs, workspace: Path, progress: Progress | None) -> None:
        self.args = args
        self.workspace = Path(workspace).resolve()
        self.script = resolve_path(self.workspace, args.script)
        self.say: Progress = progress or (lambda _msg: None)
        self.res = DiagnoseResult(ok=False, script=rel_path(self.workspace, self.script))
        self.ledger = Ledger(self.workspace) if args.record else None
        # The FD check's capture run carries no listeners of ours: the tape inspection (with its per-launch
        # checks, seconds on a program of many launches) runs beside it (`tape_run`), so the FD evaluations,
        # which wait for the capture run, start as early as the script allows.
        self.rider = CaptureRider(listeners=[], first_verdict=self.after_first_verdict)
        self.tape_future: Future[HarnessOutcome[CaptureResult]] | None = None
        self.pool: ThreadPoolExecutor | None = None
        self.tracker_future: Future[InstrumentResult] | None = None
        self._tracker_lock = threading.Lock()
        # Set once the tracker's records cannot weigh in (the gradient matches FD and no rule reports an overwrite
        # it could confirm): a tracker run still going is killed, one not yet started never starts.
        self.tracker_cancel = threading.Event()
        self.rules_done = False
        # Written when the FD check finds the gradient correct: the tape run starts no further per-launch check
        # (`LocalizeOptions.stop_file`); a correct program needs no localization.
        self.tape_stop: Path | None = None

    def timed(self, name: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        """`fn` recording its wall time under `name` (it may run on a worker thread)."""
        def run() -> Any:
            t = time.monotonic()
            try:
                return fn()
            finally:
                self.res.timings[name] = round(time.monotonic() - t, 2)
        return run

    def stage(self, name: str, fn: Callable[[], Any]) -> Any:
        self.say(name)
        return self.timed(name, fn)()

    def record(self, kind: str, payload: Any) -> None:
        if self.ledger:
            self.ledger.append(kind, payload, tool="diagnose")

    def record_run(self, run: RunScriptResult, cut_short_at: int | None) -> None:
        if self.ledger:
            payload = run.model_dump(mode="json") | ({"cut_short_at": cut_short_at} if cut_short_at is not None else {})
            fix_workflow(self.workspace, self.ledger.append("run", payload, tool="diagnose"), dict(os.environ))

    # ------------------------------------------------------------------ the stages that run the script
    def plain_run(self) -> RunScriptResult:
        """The script as the user runs it: does it run, and the shape of its loss. Unless `full_run`, it ends
        once the printed trajectory's trend is read (harness `trend_stop`)."""
        a = self.args
        cfg = RunConfig(workspace=str(self.workspace), script=str(self.script), args=list(a.args), device=a.device,
                        listeners=[] if a.full_run else [TREND_STOP_LISTENER])
        out = run_harness(cfg, HarnessResult, cwd=self.workspace, timeout_s=a.timeout_s, device=a.device)
        run = describe_run(out.process, out.result, self.workspace, self.script, a.args)
        stop = out.result.trend_stop if out.result is not None else None
        if run.ok and stop is not None and stop.stopped:
            self.res.run_cut_short_at = stop.iteration
        return run

    def fd_check(self) -> GradcheckResult:
        """The FD check (its capture run, then the FD evaluations)."""
        a = self.args
        gargs = GradcheckArgs(script=self.res.script, args=a.args, iteration=a.iteration, params=a.params,
                              objective=a.objective, device=a.device, timeout_s=a.timeout_s, record=False)
        if not self.script.is_file():
            return check(gargs, self.workspace)  # the tool's own error
        return check_capture(gargs, self.workspace, self.script, self.rider)

    def tape_run(self) -> HarnessOutcome[CaptureResult]:
        """What `tape.inspect(..., gradcheck_launches=True)` runs, as a capture-mode run beside the FD check's,
        with the same capture options (so the same iteration numbering); its tape inspector describes every
        iteration up to the checked one, so `tape_for` finds the one the FD check reports."""
        a = self.args
        tmp = Path(tempfile.mkdtemp(prefix="warpgrad-tape-"))
        self.tape_stop = tmp / "stop-launch-checks"
        try:
            cfg = CaptureConfig(workspace=str(self.workspace), script=str(self.script), args=list(a.args),
                                device=a.device, outdir=str(tmp),
                                capture=CaptureOptions(iteration=a.iteration, params=a.params, objective=a.objective),
                                listeners=[TAPE_ITERATIONS_LISTENER, LOCALIZE_LISTENER],
                                tape_inspect=TapeInspectOptions(max_tapes=4),
                                localize=LocalizeOptions(gradcheck=True, nan=True, stop_file=str(self.tape_stop)))
            return run_harness(cfg, CaptureResult, cwd=self.workspace, timeout_s=a.timeout_s, device=a.device)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def tape_for(self, gc: GradcheckResult) -> InspectTapeResult:
        """The tape of the iteration the FD check reports, as the tape run saw it (it describes the first and
        the checked iteration); a run of its own only when that run did not see it."""
        want = gc.iteration if gc.ok else None

        def rerun() -> InspectTapeResult:
            return self.stage("tape_rerun", lambda: self.tape(want if want is not None else self.args.iteration))

        out = self.tape_future.result() if self.tape_future is not None else None
        data = _tape_of_iteration(out.result, want) if out is not None and out.result is not None else None
        if out is None or data is None:
            return rerun()
        tape = describe_inspection(out.process, data, self.workspace, self.script, self.args.args)
        if self.res.gradients_wrong is not False and any(td.gradcheck_not_run for td in tape.tapes):
            # The checks were stopped on the later iteration's agreement, and the combined verdict is not
            # `correct` after all (the first iteration disagrees, or gives no verdict): localization is needed.
            return rerun()
        return tape

    def start_tracker(self) -> None:
        """Start the tracker stage on the pool, once (the FD check's thread and the main thread both may ask);
        never once it is known to be unneeded."""
        with self._tracker_lock:
            if self.tracker_future is None and self.pool is not None and not self.tracker_cancel.is_set():
                self.tracker_future = self.pool.submit(self.timed("tracker", lambda: self.tracker(self.tracker_cancel)))

    def stop_launch_checks(self, reason: str) -> None:
        """Tell the tape run to start no further per-launch check (it may be over already: then nothing changes)."""
        if self.tape_stop is not None:
            with contextlib.suppress(OSError):  # the run ended and its folder is gone: nothing to stop
                self.tape_stop.write_text(reason, encoding="utf-8")

    def after_first_verdict(self, gc: GradcheckResult) -> None:
        """The later iteration's verdict, before the first iteration's check. A definite failure there is the
        combined verdict too, so the tracker will be needed; it starts now, alongside that check. A pass is the
        combined verdict unless the first iteration disagrees (rare): the per-launch checks and the tracker stop
        now, freeing the CPU the rest of the check needs, and run again in that rare case (`tape_for`,
        `tracker_result`)."""
        if gc.passed is False:
            self.start_tracker()
        elif gc.passed is True:
            self.stop_launch_checks(_CHECKS_NOT_NEEDED)
            with self._tracker_lock:
                if self.rules_done and not self.overwrite_finding():
                    self.tracker_cancel.set()

    def tracker_result(self) -> InstrumentResult:
        """The tracker's records, now that the evidence needs them: from its run, or from a run of its own where
        that one was stopped before the verdict asked for it."""
        fut = self.tracker_future
        if fut is not None and not fut.cancelled():
            res = fut.result()
            if res.ok or not self.tracker_cancel.is_set():  # not ok with the cancel set: it was killed
                return res
        return self.stage("tracker_rerun", lambda: self.tracker(cancel=None))

    def tracker(self, cancel: threading.Event | None = None) -> InstrumentResult:
        """The tracker run; `cancel` kills it (the stage's own event; None for the rerun, which must finish)."""
        a = self.args
        return run_tracker(self.workspace, self.script, a.args, iterations=(1 if a.iteration is None else a.iteration) + 1,
                           timeout_s=a.timeout_s, device=a.device, cancel=cancel)

    def tape(self, iteration: int | None) -> InspectTapeResult:
        a = self.args
        return inspect(self.workspace, self.script, a.args, iteration=iteration, timeout_s=a.timeout_s,
                       device=a.device, gradcheck_launches=True)

    # ------------------------------------------------------------------ reading the results
    def blocked(self, run: RunScriptResult) -> DiagnoseResult:
        """The script cannot run: that is the finding."""
        res = self.res
        err = run.error
        assert err is not None
        res.blocked = f"{err.kind}: {err.message}"
        if err.file and err.line:
            res.blocked += f" ({err.file}:{err.line})"
        res.summary = _summary(res)
        res.next_steps = ["make the script run (the error above), then rerun warpgrad diagnose"]
        return res

    def verdict(self, gc: GradcheckResult) -> None:
        res = self.res
        res.gradcheck = gc
        res.signature, res.factor = gc.signature, gc.factor
        res.gradients_wrong = None if gc.passed is None else (not gc.passed)
        if gc.forward_nonfinite:
            # A forward that is already inf: the gradient is not the bug.
            res.gradients_wrong = False
        # Slopes that differ only at a few entries of a non-smooth objective stay "no verdict", as gradcheck says:
        # those entries are taken to sit at kinks, not shown to, and a bug confined to a few entries (a wrong
        # contact gradient) looks the same. "Not wrong" there would be a guess.

    def overwrite_finding(self) -> bool:
        """A rule reports an overwrite the tracker can confirm or refute."""
        return any(f.code in _TRACKER_CONFIRMS for f in self.res.findings)

    def needs_tracker(self) -> bool:
        """The tracker's records only weigh in the ranking when the gradient may be wrong (with a verified
        gradient every pattern is an incidental smell), or when a rule reports an overwrite it can confirm."""
        return self.res.gradients_wrong is not False or self.overwrite_finding()

    def rules(self, run: RunScriptResult) -> None:
        files = sorted({self.workspace / f for f in run.files} | {self.script})
        findings = self.stage("rules", lambda: run_rules(files, self.workspace))
        with self._tracker_lock:
            self.res.findings, self.rules_done = findings, True

    def bisect_if_ambiguous(self) -> None:
        res, a = self.res, self.args
        strong = [h for h in res.hypotheses if h.score >= 0.5]
        if a.bisect == "always" or (a.bisect == "auto" and res.gradients_wrong and not strong
                                    and res.signature in (Signature.SUBTLY_WRONG, Signature.EXACT_FACTOR)):
            res.bisect = self.stage("bisect", lambda: bisect_horizon(BisectArgs(
                script=res.script, args=a.args, iteration=a.iteration, params=a.params, device=a.device,
                timeout_s=a.timeout_s, record=False), self.workspace))
            _rank(self.workspace, res)

    def attach_ready_fixes(self) -> None:
        """Each hypothesis at a rule hit with a mechanical repair carries it, as the exact call."""
        hits: list[tuple[Finding, ReadyFix | None]] = []
        for h in self.res.hypotheses:
            # Ranking merges evidence within a line of each other under one hypothesis (its rule may be the
            # signature's or the tape's), so the rule hit is looked up by place.
            hit = next((f for f in self.res.findings if h.file == f.path and h.line is not None
                        and abs(f.line - h.line) <= 1 and (h.rule == f.code or any(
                            e.source == "rule" and e.detail == f.message for e in h.evidence))), None)
            if hit is not None:
                h.ready_fix = ready_fix(hit, self.workspace)
                hits.append((hit, h.ready_fix))
        # An edit that repairs one of two independent causes is not the fix: it says what it leaves.
        mark_partial([(hit, fix) for hit, fix in hits if fix is not None], [hit for hit, _ in hits])

    def conclude(self) -> DiagnoseResult:
        res = self.res
        self.attach_ready_fixes()
        res.ruled_out = _ruled_out(res)
        res.summary = _summary(res)
        res.next_steps = _next_steps(res)
        res.ok = True
        self.record("diagnose", res.model_dump(include={"script", "gradients_wrong", "signature", "factor", "summary",
                                                         "hypotheses", "ruled_out", "timings", "files",
                                                         "run_cut_short_at"}))
        return res


def _tape_of_iteration(data: CaptureResult, want: int | None) -> CaptureResult | None:
    """A capture run's report with the tape inspector's result for iteration `want` (None: the iteration the
    inspector chose); None when the run did not describe that iteration."""
    ti = data.tape_inspect
    if want is None or ti is None or ti.iteration is None or ti.iteration == want:
        return data
    group = (ti.by_iteration or {}).get(str(want))
    return None if group is None else data.model_copy(update={"tape_inspect": group})


def run_diagnose(args: DiagnoseArgs, workspace: Path, progress: Progress | None = None) -> DiagnoseResult:
    st = _Stages(args, workspace, progress)
    res = st.res
    st.say("run")
    # The plain run, the FD check and the tape inspection look at the same unchanged program and none needs
    # another's result, so they run side by side; the plain run stops
    # once its trend is read. The tracker (its own module build) follows the plain run on its thread; its
    # records weigh in only when the evidence gives them something to confirm (a rule's overwrite finding, or
    # a gradient that is not verified). On a script that cannot run every stage fails as fast as it does, and
    # only the plain run's verdict (blocked) is reported.
    with ThreadPoolExecutor(4) as pool:
        st.pool = pool
        run_future = pool.submit(st.timed("run", st.plain_run))
        gc_future = pool.submit(st.timed("gradcheck", st.fd_check))
        st.tape_future = pool.submit(st.timed("tape", st.tape_run))
        run = run_future.result()
        res.run, res.files = run, run.files
        res.trajectory = summarize(run.loss_points)
        # A cut-short run is recorded with the point it stopped at: the finish gate compares a rerun with it
        # there only, and it fixes the workflow (the first run of the script as the user runs it).
        st.record_run(run, res.run_cut_short_at)
        if not run.ok:
            return st.blocked(run)  # the pool still waits for the FD check, which fails as the script does
        st.rules(run)
        # The tracker starts now, in the slot the plain run frees (at most two runs at once besides the FD
        # hubs), rather than after the first verdict: it was the last run on the critical path, running alone
        # for seconds after the FD check ended. Its records are used only when the evidence asks for them
        # (`needs_tracker`); on a program whose gradient is verified it runs for nothing, alongside the check.
        st.start_tracker()
        st.say("gradcheck")
        gc = gc_future.result()  # an error of the check itself (not of the script) propagates
        st.verdict(gc)
        st.record("gradcheck", gc)
        if res.gradients_wrong is False:
            st.stop_launch_checks(_CHECKS_NOT_NEEDED)
        if st.needs_tracker():
            st.say("tracker")
            res.tracker = st.tracker_result()
        else:
            # Queued: it never starts; running: its run is killed, so the pool does not wait for it below.
            st.tracker_cancel.set()
            if st.tracker_future is not None:
                st.tracker_future.cancel()
        res.tape = st.tape_for(gc)
    if res.tracker is None:
        res.timings.pop("tracker", None)  # its time is not part of this diagnosis when its records are not
    else:
        st.record("tracker", res.tracker)
    _rank(st.workspace, res)
    st.bisect_if_ambiguous()
    return st.conclude()


def _next_steps(res: DiagnoseResult) -> list[str]:
    steps = []
    top = res.hypotheses[0] if res.hypotheses else None
    if res.gradients_wrong:
        if top and top.next_check:
            steps.append(top.next_check)
        elif res.signature in TABLE:
            steps.append(TABLE[res.signature].next_check)
        steps.append(f"after the fix, rerun `warpgrad gradcheck {res.script}` (the same harness) and the workflow")
    elif res.gradients_wrong is None and res.gradcheck is not None:
        steps.append(TABLE[Signature.INCONCLUSIVE].next_check)
    return [s for s in steps if s]


# What a terminal shows for each stage (`progress.stage`): what the stage does and why it takes its time.
_STAGE_LABELS = {"run": "running the script", "gradcheck": "FD check (capture and tape, then perturbed runs)",
                 "tracker": "overwrite tracker (recompiles with the flag on)", "tape": "inspecting the tape",
                 "tape_rerun": "inspecting the tape (again, at the iteration the check reported)",
                 "rules": "quick-check rules", "bisect": "bisecting the horizon"}


def _stage(name: str) -> None:
    progress.stage(_STAGE_LABELS.get(name, name))


def _diagnose_exit(r: DiagnoseResult) -> int:
    return 1 if r.gradients_wrong else (0 if r.gradients_wrong is False else 2)


@tool(args=DiagnoseArgs, result=DiagnoseResult, long_running=True, render=diagnose_text, forks=True,
      cli=CliCommand(name="diagnose", help="Diagnose a training script's gradients: FD check, tracker, tape, rules, "
                                           "localization; ranked causes. Exit 0: gradients correct, 1: wrong, 2: no "
                                           "verdict or the script cannot run. Arguments after `--` go to the script.",
                     rename={"params": "param", "timeout_s": "timeout"}, exit_code=_diagnose_exit,
                     render="warpgrad.cli.diagnose:render_out", status="starting...", budgeted_json=True,
                     outputs=(FileOutput("md", "Also write a Markdown report to this file.",
                                         "warpgrad.cli.diagnose:write_markdown"),
                              FileOutput("html", "Also write a self-contained HTML page (plots of AD against FD, the "
                                                 "step sweep, the loss and the tape) to this file.",
                                         "warpgrad.cli.diagnose:write_html_page"))))
def diagnose(args: DiagnoseArgs, workspace: Path) -> DiagnoseResult:
    """Run the whole measured pipeline on a training script, without an LLM: run it, check its gradient
    against finite differences (signature), run Warp's overwrite tracker, inspect the recorded tape for
    hazards the tracker cannot see, scan the code with the quick-check rules, bisect the horizon when still
    ambiguous, and rank the hypotheses with the signature table. Returns whether the gradients are wrong,
    how, the most likely causes with file:line and evidence, and what was ruled out."""
    return run_diagnose(args, workspace, progress=_stage)
