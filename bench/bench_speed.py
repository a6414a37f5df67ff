"""Benchmark: issue 14's speed targets, `gradcheck` and `diagnose` over the script's own run, CLI and warm server.

Run: `python bench/bench_speed.py [--cases ID ...] [--limit 8] [--reps 3] [--out bench/results/speed.json]
[--diagnose-cli-only]`

Cases: the shipped suite's triggering cases, the first `--limit` by id (or exactly `--cases`). Per case, in a
copy of its files with a kernel cache of its own (`WARP_CACHE_PATH`): the script once (fills the cache), then
`warpgrad gradcheck` and `warpgrad diagnose` once each, untimed (warpgrad's own builds, such as the tracker's
instrumented one). Then `--reps` rounds; each times, in an order that reverses every round so a change of the
machine's load hits every side:
- `script`: `python ENTRY`, the script's own cost;
- `gradcheck_cli`, `diagnose_cli`: `warpgrad gradcheck|diagnose ENTRY --json --no-record`, a fresh CLI process
  (diagnose opens its own worker pool, as a user's run does);
- `diagnose_served`: the same one-shot CLI command through the warm command server (`cli/warm`, a server of the
  case's own, started and sent one untimed command before the rounds): the CLI as a user's second and later
  commands pay it;
- `gradcheck_warm`, `diagnose_warm`: `check()` and `run_diagnose()` inside one helper process per case that
  opened `worker_pool()` once and made one untimed call of each before the rounds, the cost of a tool call on a
  warm server (`warpgrad mcp`, `warpgrad chat`). The helper stays up across the rounds and runs its pair when
  asked, so its calls alternate with the others too.
Wall seconds (on a 2-core machine shared with other work CPU seconds miss the sandboxed harness processes, see
bench_diagnose.py). Per case: medians, ratios to the script's median, and the verdicts each way (gradcheck's
signature and `passed`, diagnose's signature and `gradients_wrong`) with whether every run agreed. Summary: the
median over cases of each ratio (issue 14: diagnose <= 3x, gradcheck <= 2x) and whether all verdicts were stable.
`WARPGRAD_WORKER` is removed from the environment so every side runs with warpgrad's defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

from pydantic import BaseModel

SCRIPT, GC_CLI, DG_CLI, GC_WARM, DG_WARM = "script", "gradcheck_cli", "diagnose_cli", "gradcheck_warm", "diagnose_warm"
DG_SERVED = "diagnose_served"
KINDS = (SCRIPT, GC_CLI, DG_CLI, DG_SERVED, GC_WARM, DG_WARM)
WARPGRAD = str(Path(sys.executable).parent / "warpgrad")
TIMEOUT_S = 1800
# Lines of the warm helper's protocol start with this: anything else on its stdout is not ours.
TAG = "BENCH "

WARM_CHILD = """
import json, sys, time
from pathlib import Path
from warpgrad.tools.diagnose import DiagnoseArgs, run_diagnose
from warpgrad.tools.gradcheck import GradcheckArgs, check
from warpgrad.tools.worker import worker_pool
ws, entry, tag = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
gc_args = GradcheckArgs(script=entry, record=False)
dg_args = DiagnoseArgs(script=entry, record=False)

def gradcheck():
    r = check(gc_args, ws)
    return {"signature": r.signature.value, "verdict": r.passed}

def diagnose():
    r = run_diagnose(dg_args, ws)
    return {"signature": r.signature.value, "verdict": r.gradients_wrong}

calls = {"gradcheck_warm": gradcheck, "diagnose_warm": diagnose}
# A long idle limit: the worker must outlive the CLI runs between two of our rounds.
with worker_pool(idle_s=7200) as pool:
    if pool is None:
        sys.exit("no worker pool (WARPGRAD_WORKER=0, or a pool already active)")
    first = {name: fn() for name, fn in calls.items()}  # boots the worker: a server is warm before its calls
    print(tag + json.dumps({"ready": first}), flush=True)
    for line in sys.stdin:
        out = {}
        for name in json.loads(line):
            t = time.perf_counter()
            v = calls[name]()
            out[name] = {"s": time.perf_counter() - t, **v}
        print(tag + json.dumps({"round": out}), flush=True)
    print(tag + json.dumps({"served": pool.served, "spawned": pool.spawned}), flush=True)
"""


class Verdict(BaseModel, frozen=True):
    """One run's verdict: gradcheck's signature and `passed`, or diagnose's signature and `gradients_wrong`."""

    signature: str
    verdict: bool | None = None


class Run(BaseModel):
    s: float
    verdict: Verdict | None = None  # None for the script's own run
    error: str | None = None


class WarmCall(BaseModel):
    s: float
    signature: str
    verdict: bool | None


class CaseRow(BaseModel):
    case: str
    entry: str
    median_s: dict[str, float]
    ratio: dict[str, float]
    runs_s: dict[str, list[float]]
    gradcheck_verdicts: list[Verdict]
    diagnose_verdicts: list[Verdict]
    gradcheck_stable: bool
    diagnose_stable: bool
    warm_pool: dict[str, int]
    errors: list[str]


class Summary(BaseModel):
    cases: int
    reps: int
    median_ratio: dict[str, float]
    max_ratio: dict[str, float]
    all_verdicts_stable: bool
    errors: int
    python: str
    cpus: int | None
    # A shared machine's load moves every ratio: it is reported beside them.
    load_average_start: list[float] = []
    load_average_end: list[float] = []
    command: str = ""


def bench_env(cache: Path) -> dict[str, str]:
    # The CLI sides run in their own process (the warm server off) unless `served_env` turns it on.
    env = {k: v for k, v in os.environ.items() if k not in ("WARPGRAD_WORKER", "CI")} | {"WARPGRAD_SERVER": "0"}
    env["WARP_CACHE_PATH"] = str(cache)
    # warpgrad's own kernel caches (tracker builds, Warp's autograd module) start empty for every case: filled by the
    # untimed warm-up runs, never by an earlier benchmark or another warpgrad.
    env["WARPGRAD_KERNEL_CACHE"] = str(cache.parent / "warpgrad-kernels")
    return env


def served_env(env: dict[str, str], state: Path) -> dict[str, str]:
    return env | {"WARPGRAD_SERVER": "1", "WARPGRAD_KEY_DIR": str(state)}


def start_server(env: dict[str, str]) -> None:
    """Start the warm server for `env` and wait until it answers."""
    subprocess.run([WARPGRAD, "server", "start"], env=env, capture_output=True, timeout=60, check=False)
    end = time.monotonic() + 120
    while time.monotonic() < end:
        out = subprocess.run([WARPGRAD, "server", "status"], env=env, capture_output=True, text=True, timeout=60,
                             check=False).stdout
        if out.startswith("warm server pid"):
            return
        time.sleep(0.3)
    raise RuntimeError("the warm server did not start")


def script_run(entry: str, ws: Path, env: dict[str, str]) -> Run:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, entry], cwd=ws, env=env, capture_output=True, text=True,
                       timeout=TIMEOUT_S, check=False)
    wall = time.perf_counter() - t
    return Run(s=wall, error=None if p.returncode == 0 else f"script exit {p.returncode}: {p.stderr[-500:]}")


def cli_run(command: str, entry: str, ws: Path, env: dict[str, str]) -> Run:
    """`warpgrad gradcheck|diagnose ENTRY --json --no-record`: wall seconds and its verdict."""
    t = time.perf_counter()
    p = subprocess.run([WARPGRAD, command, entry, "--json", "--no-record"], cwd=ws, env=env, capture_output=True,
                       text=True, timeout=TIMEOUT_S, check=False)
    wall = time.perf_counter() - t
    start = p.stdout.find("{")
    if start < 0:
        return Run(s=wall, verdict=Verdict(signature="error"),
                   error=f"{command} exit {p.returncode}: {p.stderr[-500:]}")
    data = json.loads(p.stdout[start:])
    key = "passed" if command == "gradcheck" else "gradients_wrong"
    # The JSON leaves out what is None (no verdict either way).
    return Run(s=wall, verdict=Verdict(signature=data["signature"], verdict=data.get(key)))


class WarmSession:
    """The helper process holding one warm worker pool for a case; runs its calls when asked."""

    def __init__(self, ws: Path, entry: str, env: dict[str, str], stderr: Path) -> None:
        self._err_path = stderr
        self._err: IO[str] = stderr.open("w", encoding="utf-8")
        self.proc = subprocess.Popen([sys.executable, "-c", WARM_CHILD, str(ws), entry, TAG], cwd=ws, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True)
        self.first = self._read()["ready"]

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(TAG):
                return json.loads(line[len(TAG):])
        self._err.flush()
        tail = self._err_path.read_text(encoding="utf-8", errors="replace")[-2000:]
        raise RuntimeError(f"warm helper exited ({self.proc.wait()}): {tail}")

    def calls(self, names: list[str]) -> dict[str, WarmCall]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(names) + "\n")
        self.proc.stdin.flush()
        return {k: WarmCall.model_validate(v) for k, v in self._read()["round"].items()}

    def close(self) -> dict[str, int]:
        """Ends the helper; its pool's counters (runs served by the worker, workers spawned)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            stats = self._read()
        finally:
            self.proc.wait(timeout=120)
            self._err.close()
        return {k: int(v) for k, v in stats.items()}

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


def round_order(rep: int, diagnose_cli_only: bool = False) -> list[str]:
    """The sides of one round; the warm pair counts as one step. Reversed every other round."""
    order = [SCRIPT, DG_CLI, DG_SERVED] if diagnose_cli_only else [SCRIPT, GC_CLI, DG_CLI, DG_SERVED, "warm"]
    return order if rep % 2 == 0 else order[::-1]


def one(case_id: str, entry: str, suite_root: Path, reps: int, diagnose_cli_only: bool = False) -> CaseRow:
    work = Path(tempfile.mkdtemp(prefix=f"wg-benchspeed-{case_id}-"))
    ws, cache = work / "ws", work / "cache"
    shutil.copytree(suite_root / "files" / case_id, ws)
    env = bench_env(cache)
    served = served_env(env, work / "state")
    runs: dict[str, list[Run]] = {k: [] for k in KINDS}
    warm: WarmSession | None = None
    try:
        warmup = [script_run(entry, ws, env),
                  None if diagnose_cli_only else cli_run("gradcheck", entry, ws, env), cli_run("diagnose", entry, ws, env)]
        start_server(served)
        warmup.append(cli_run("diagnose", entry, ws, served))  # the server boots this workspace's worker
        warm = None if diagnose_cli_only else WarmSession(ws, entry, env, work / "warm.stderr")
        for rep in range(reps):
            for side in round_order(rep, diagnose_cli_only):
                if side == SCRIPT:
                    runs[SCRIPT].append(script_run(entry, ws, env))
                elif side in (GC_CLI, DG_CLI, DG_SERVED):
                    runs[side].append(cli_run("gradcheck" if side == GC_CLI else "diagnose", entry, ws,
                                              served if side == DG_SERVED else env))
                elif warm is not None:
                    pair = [GC_WARM, DG_WARM] if rep % 2 == 0 else [DG_WARM, GC_WARM]
                    for name, c in warm.calls(pair).items():
                        runs[name].append(Run(s=c.s, verdict=Verdict(signature=c.signature, verdict=c.verdict)))
        pool = warm.close() if warm is not None else {}
        first = {k: Verdict.model_validate(v) for k, v in warm.first.items()} if warm is not None else {}
        return summarize_case(case_id, entry, runs, warmup, first, pool)
    finally:
        if warm is not None:
            warm.kill()
        subprocess.run([WARPGRAD, "server", "stop"], env=served, capture_output=True, timeout=60, check=False)
        shutil.rmtree(work, ignore_errors=True)


def summarize_case(case_id: str, entry: str, runs: dict[str, list[Run]], warmup: list[Run | None],
                   first_warm: dict[str, Verdict], pool: dict[str, int]) -> CaseRow:
    med = {k: statistics.median(r.s for r in v) for k, v in runs.items() if v}
    # Every run counts for stability, the untimed ones too.
    gc = [r.verdict for r in [warmup[1], *runs[GC_CLI], *runs[GC_WARM]] if r is not None and r.verdict] + [
        first_warm[k] for k in (GC_WARM,) if k in first_warm]
    dg = [r.verdict for r in [*warmup[2:], *runs[DG_CLI], *runs[DG_SERVED], *runs[DG_WARM]]
          if r is not None and r.verdict] + [
        first_warm[k] for k in (DG_WARM,) if k in first_warm]
    errors = [r.error for r in [*warmup, *(x for v in runs.values() for x in v)] if r is not None and r.error]
    return CaseRow(case=case_id, entry=entry, median_s={k: round(v, 3) for k, v in med.items()},
                   ratio={k: round(med[k] / med[SCRIPT], 2) for k in KINDS if k != SCRIPT and k in med},
                   runs_s={k: [round(r.s, 3) for r in v] for k, v in runs.items()},
                   gradcheck_verdicts=list(dict.fromkeys(gc)), diagnose_verdicts=list(dict.fromkeys(dg)),
                   gradcheck_stable=len(set(gc)) <= 1, diagnose_stable=len(set(dg)) <= 1,  # none: that side was not timed
                   warm_pool=pool, errors=errors)


def summarize(rows: list[CaseRow], reps: int) -> Summary:
    ratios = [k for k in KINDS if k != SCRIPT and all(k in r.ratio for r in rows)]
    return Summary(cases=len(rows), reps=reps,
                   median_ratio={k: round(statistics.median(r.ratio[k] for r in rows), 2) for k in ratios},
                   max_ratio={k: max(r.ratio[k] for r in rows) for k in ratios},
                   all_verdicts_stable=all(r.gradcheck_stable and r.diagnose_stable for r in rows),
                   errors=sum(len(r.errors) for r in rows), python=sys.version.split()[0], cpus=os.cpu_count())


def main() -> None:
    from warpgrad.evals.suite import SUITE_DIR, load_suite

    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", nargs="*", help="Exactly these suite cases (default: the triggering ones, by id).")
    ap.add_argument("--limit", type=int, default=8, help="At most this many default cases.")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "speed.json")
    ap.add_argument("--diagnose-cli-only", action="store_true", help="Time only the script and the one-shot "
                    "`warpgrad diagnose` CLI, in its own process and through the warm command server (issue 25), not "
                    "gradcheck or the in-process warm server.")
    a = ap.parse_args()
    suite = load_suite(SUITE_DIR)
    if a.cases:
        cases = [c for c in suite.cases if str(c.id) in a.cases]
        missing = set(a.cases) - {str(c.id) for c in cases}
        if missing:
            ap.error(f"no such cases: {', '.join(sorted(missing))}")
    else:
        cases = sorted((c for c in suite.cases if c.should_trigger), key=lambda c: str(c.id))[:a.limit]
    load_start = [round(x, 2) for x in os.getloadavg()]
    rows = []
    for c in cases:
        assert c.entry, f"case {c.id} has no entry script"
        rows.append(one(str(c.id), c.entry, suite.root, a.reps, a.diagnose_cli_only))
        r = rows[-1]
        print(json.dumps({"case": r.case, "script_s": r.median_s[SCRIPT], "ratio": r.ratio,
                          "gradcheck": [v.model_dump() for v in r.gradcheck_verdicts],
                          "diagnose": [v.model_dump() for v in r.diagnose_verdicts],
                          "stable": r.gradcheck_stable and r.diagnose_stable, "errors": len(r.errors)}), flush=True)
    summary = summarize(rows, a.reps).model_copy(update={
        "load_average_start": load_start, "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "command": " ".join(["python", "bench/bench_speed.py", *sys.argv[1:]])})
    print(summary.model_dump_json())
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"summary": summary.model_dump(), "rows": [r.model_dump() for r in rows]}, indent=2)
                     + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
