"""Benchmark: issue 22's determinism contract, the same program checked several times gives the same answer.

Run: `python bench/bench_determinism.py [--suites evals evals/blind evals/blind3 evals/blind4] [--cases ID ...] [--reps 3]
[--modes hub nohub] [--jobs 1] [--out bench/results/determinism.json]`

Cases: every triggering case of each suite (`graders/<id>/meta.json`, its `entry`), or exactly `--cases`. Each
run is what a user types: `python -m warpgrad gradcheck ENTRY --json` in a fresh copy of `files/<id>/` (the
suite is never written to), `--reps` times with the FD hub on (warpgrad's default) and `--reps` times with
`WARPGRAD_FD_HUB=0`. Every case has a kernel cache of its own (`WARP_CACHE_PATH`), shared by its runs, so the
first run compiles and the rest are warm, as on a user's machine. `WARPGRAD_WORKER` is removed so every run uses
warpgrad's defaults.

Per case, over all its runs (both modes): whether the verdict (the exit code: 0 match, 1 wrong, 2 no verdict),
the signature, the parameter roles (`params[].name` and `.role`) and the numbers agree. The numbers agree when
every run has the same directions and, per direction, AD and FD each lie within the widest noise band any run
reported for that direction (plus 1e-6 relative), and the objective value within 1e-5 relative. A run that
crashes or prints no JSON counts as its own verdict (`error`), so it breaks agreement.

Output: a markdown table on stdout and the raw runs plus the per-case summary as JSON (`--out`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SUITES = [ROOT / "evals", ROOT / "evals" / "blind", ROOT / "evals" / "blind3", ROOT / "evals" / "blind4"]
VERDICTS = {0: "correct", 1: "wrong", 2: "no_verdict"}
NUM_REL = 1e-6  # slack on top of the reported noise band (float formatting of the JSON)
OBJ_REL = 1e-5


class CaseMetaLite(BaseModel):
    """The fields of a case's meta.json this benchmark needs."""

    model_config = ConfigDict(extra="ignore")

    id: str
    should_trigger: bool = True
    entry: str | None = None
    expected_verdict: str | None = None
    """The graders' label (`gradients_correct` / `gradients_wrong`), for the wrong-verdict count."""


class ParamOut(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    role: str | None = None


class DirectionOut(BaseModel):
    model_config = ConfigDict(extra="ignore")

    direction: int | None = None
    scope: str | None = None
    ad: float | None = None
    fd: float | None = None
    band: float | None = None


class GradcheckOut(BaseModel):
    """The part of `warpgrad gradcheck --json` compared across runs."""

    model_config = ConfigDict(extra="ignore")

    signature: str | None = None
    passed: bool | None = None
    objective_value: float | None = None
    params: list[ParamOut] = Field(default_factory=list)
    directions: list[DirectionOut] = Field(default_factory=list)


class Run(BaseModel):
    """One CLI run of one case."""

    case: str
    suite: str
    mode: str
    rep: int
    exit_code: int | None
    verdict: str
    wall_s: float
    out: GradcheckOut | None = None
    error: str = ""


class CaseSummary(BaseModel):
    case: str
    suite: str
    runs: int
    verdicts: list[str]
    signatures: list[str]
    roles: list[str]
    verdict_same: bool
    signature_same: bool
    roles_same: bool
    numbers_same: bool
    numbers_why: str = ""
    deterministic: bool


class MergedFile(BaseModel):
    """What an earlier run wrote to --out (read back by --merge)."""

    model_config = ConfigDict(extra="ignore")

    commands: list[str] = Field(default_factory=list)
    runs: list[Run] = Field(default_factory=list)


def _cases(suites: list[Path], only: set[str] | None) -> list[tuple[Path, CaseMetaLite]]:
    found = []
    for suite in suites:
        for meta_path in sorted((suite / "graders").glob("*/meta.json")):
            meta = CaseMetaLite.model_validate_json(meta_path.read_text(encoding="utf-8"))
            if not meta.should_trigger or not meta.entry:
                continue
            if only is not None and meta.id not in only:
                continue
            found.append((suite, meta))
    return found


def first_json(text: str) -> dict | None:
    """The first JSON document on stdout (anything printed after it is ignored)."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        doc, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def run_once(suite: Path, meta: CaseMetaLite, mode: str, rep: int, cache_root: Path, timeout: float) -> Run:
    stage = Path(tempfile.mkdtemp(prefix=f"wg-det-{meta.id}-"))
    try:
        shutil.copytree(
            suite / "files" / meta.id,
            stage,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__", ".warpgrad"),
        )
        env = dict(os.environ)
        env.pop("WARPGRAD_WORKER", None)
        env["WARP_CACHE_PATH"] = str(cache_root / meta.id)
        if mode == "nohub":
            env["WARPGRAD_FD_HUB"] = "0"
        else:
            env.pop("WARPGRAD_FD_HUB", None)
        argv = [sys.executable, "-m", "warpgrad", "gradcheck", str(meta.entry), "--json"]
        t0 = time.perf_counter()
        try:
            p = subprocess.run(
                argv,
                cwd=stage,
                env=env,
                capture_output=True,
                text=True,
                encoding="utf-8",
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return Run(
                case=meta.id,
                suite=suite.name,
                mode=mode,
                rep=rep,
                exit_code=None,
                verdict="error",
                wall_s=time.perf_counter() - t0,
                error=f"timed out after {timeout:.0f} s",
            )
        wall = time.perf_counter() - t0
        doc = first_json(p.stdout)
        if doc is None:
            return Run(
                case=meta.id,
                suite=suite.name,
                mode=mode,
                rep=rep,
                exit_code=p.returncode,
                verdict="error",
                wall_s=wall,
                error=(p.stderr or p.stdout)[-400:],
            )
        return Run(
            case=meta.id,
            suite=suite.name,
            mode=mode,
            rep=rep,
            exit_code=p.returncode,
            verdict=VERDICTS.get(p.returncode, f"exit {p.returncode}"),
            wall_s=wall,
            out=GradcheckOut.model_validate(doc),
        )
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _roles(r: Run) -> str:
    if r.out is None:
        return "-"
    return ", ".join(sorted(f"{p.name}={p.role}" for p in r.out.params)) or "-"


def _numbers_agree(runs: list[Run]) -> tuple[bool, str]:
    outs = [r.out for r in runs if r.out is not None]
    if len(outs) != len(runs):
        return False, "a run gave no JSON"
    shapes = {tuple((d.direction, d.scope) for d in o.directions) for o in outs}
    if len(shapes) > 1:
        return False, "different directions"
    for k in range(len(outs[0].directions)):
        col = [o.directions[k] for o in outs]
        band = max((d.band or 0.0) for d in col)
        for attr in ("ad", "fd"):
            vals = [getattr(d, attr) for d in col]
            if any(v is None for v in vals):
                continue
            spread = max(vals) - min(vals)
            if spread > band + NUM_REL * max(abs(v) for v in vals):
                return False, f"direction {k}: {attr} spread {spread:.3g} > band {band:.3g}"
    objs = [o.objective_value for o in outs if o.objective_value is not None]
    if objs and max(objs) - min(objs) > OBJ_REL * max(abs(v) for v in objs):
        return False, f"objective {min(objs):.7g} .. {max(objs):.7g}"
    return True, ""


def summarize(runs: list[Run]) -> CaseSummary:
    verdicts = [r.verdict for r in runs]
    sigs = [(r.out.signature or "-") if r.out else "error" for r in runs]
    roles = [_roles(r) for r in runs]
    same_num, why = _numbers_agree(runs)
    s = CaseSummary(
        case=runs[0].case,
        suite=runs[0].suite,
        runs=len(runs),
        verdicts=verdicts,
        signatures=sigs,
        roles=roles,
        verdict_same=len(set(verdicts)) == 1,
        signature_same=len(set(sigs)) == 1,
        roles_same=len(set(roles)) == 1,
        numbers_same=same_num,
        numbers_why=why,
        deterministic=False,
    )
    s.deterministic = s.verdict_same and s.signature_same and s.roles_same and s.numbers_same
    return s


def _counts(xs: list[str]) -> str:
    return ", ".join(f"{x} x{xs.count(x)}" for x in sorted(set(xs)))


# A run's verdict against the graders' label: what a wrong verdict is (no verdict is never wrong).
_WRONG_VERDICT = {"gradients_correct": "wrong", "gradients_wrong": "correct"}


def labels(suites: list[Path]) -> dict[tuple[str, str], str]:
    """`{(suite name, case): expected_verdict}` from the graders' meta.json files."""
    out = {}
    for suite in suites:
        for meta_path in sorted((suite / "graders").glob("*/meta.json")):
            meta = CaseMetaLite.model_validate_json(meta_path.read_text(encoding="utf-8"))
            if meta.expected_verdict:
                out[(suite.name, meta.id)] = meta.expected_verdict
    return out


def table(summaries: list[CaseSummary], label: dict[tuple[str, str], str] | None = None) -> str:
    yes = {True: "yes", False: "**no**"}
    label = label or {}
    lines = [
        "| suite | case | label | runs | verdicts | signatures | verdict same | signature same | roles same | "
        "numbers same |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    wrong: list[str] = []
    for s in summaries:
        expected = label.get((s.suite, s.case))
        bad = _WRONG_VERDICT.get(expected or "")
        if bad is not None and bad in s.verdicts:
            wrong.append(f"{s.case} ({expected}, judged {bad} in {s.verdicts.count(bad)} of {s.runs} runs)")
        lines.append(
            f"| {s.suite} | {s.case} | {(expected or '?').replace('gradients_', '')} | {s.runs} | "
            f"{_counts(s.verdicts)} | {_counts(s.signatures)} | "
            f"{yes[s.verdict_same]} | {yes[s.signature_same]} | {yes[s.roles_same]} | "
            f"{yes[s.numbers_same]}{' (' + s.numbers_why + ')' if s.numbers_why else ''} |"
        )
    n = len(summaries)
    lines.append("")
    lines.append(
        f"{sum(s.deterministic for s in summaries)} of {n} cases deterministic in every respect; "
        f"verdict stable on {sum(s.verdict_same for s in summaries)}, signature on "
        f"{sum(s.signature_same for s in summaries)}, roles on {sum(s.roles_same for s in summaries)}, "
        f"numbers on {sum(s.numbers_same for s in summaries)}."
    )
    if label:
        lines.append(f"Wrong verdicts against the graders' labels: {len(wrong)}" + (": " + "; ".join(wrong) if wrong
                                                                                   else "."))
    return "\n".join(lines)


def _summaries(runs: list[Run]) -> list[CaseSummary]:
    by_case: dict[tuple[str, str], list[Run]] = {}
    for r in runs:
        by_case.setdefault((r.suite, r.case), []).append(r)
    return [summarize(v) for _, v in sorted(by_case.items())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", type=Path, nargs="+", default=DEFAULT_SUITES)
    ap.add_argument("--cases", nargs="+", default=None, help="only these case ids")
    ap.add_argument("--reps", type=int, default=3, help="runs per case and mode")
    ap.add_argument("--modes", nargs="+", choices=["hub", "nohub"], default=["hub", "nohub"])
    ap.add_argument("--jobs", type=int, default=1, help="runs in parallel (each is its own process tree)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per gradcheck run")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "determinism.json")
    ap.add_argument("--merge", action="store_true", help="keep the runs of other cases already in --out")
    ap.add_argument("--render", type=Path, nargs="+", default=None,
                    help="run nothing: print the table of these earlier --out files, merged")
    a = ap.parse_args()
    if a.render:
        runs = [r for f in a.render for r in MergedFile.model_validate_json(f.read_text(encoding="utf-8")).runs]
        print(table(_summaries(runs), labels([s.resolve() for s in a.suites])))
        return
    cases = _cases([s.resolve() for s in a.suites], set(a.cases) if a.cases else None)
    if not cases:
        raise SystemExit("no cases matched")
    cache_root = Path(tempfile.mkdtemp(prefix="wg-det-cache-"))
    # rep-major order: a case's first run (which compiles) is not timed against its warm runs' load
    tasks = [(s, m, mode, rep) for rep in range(a.reps) for s, m in cases for mode in a.modes]
    t0 = time.time()
    try:
        with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            runs = list(pool.map(lambda t: run_once(*t, cache_root, a.timeout), tasks))
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    commands = [" ".join(sys.argv)]
    if a.merge and a.out.is_file():
        old = MergedFile.model_validate_json(a.out.read_text(encoding="utf-8"))
        ran = {(r.suite, r.case) for r in runs}
        runs = [r for r in old.runs if (r.suite, r.case) not in ran] + runs
        commands = old.commands + commands
    summaries = _summaries(runs)
    print(table(summaries, labels([s.resolve() for s in a.suites])))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(
        json.dumps(
            {
                "commands": commands,
                "reps": a.reps,
                "modes": a.modes,
                "wall_s": round(time.time() - t0, 1),
                "summary": [s.model_dump() for s in summaries],
                "runs": [r.model_dump() for r in runs],
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"\nwrote {a.out} ({len(runs)} runs, {time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
