"""Benchmark: harness runs forked from a warm worker vs fresh harness processes.

Run: `python bench/bench_worker.py [--reps 5] [--leak 50] [--diagnose] [--out bench/results/worker.json]`,
or `python bench/bench_worker.py --cases heat_rod_conductivity ...` to compare `run_diagnose`'s verdict and
top five hypotheses through fresh processes and through a worker on suite cases (each side twice).

On a copy of `examples/bouncing_chain/train.py` with a warm kernel cache, each round runs, in turn:
the script by itself (`python train.py`, its own cost), `run_script` and `gradcheck` through fresh
processes (no pool), and the same two through one warm worker (`tools/worker.py`, opened once before
the rounds; its boot is reported separately). With `--diagnose`, `warpgrad diagnose` too, with
`WARPGRAD_WORKER=0` and without. Medians over the rounds and ratios to the script's own run; the order
of cold and warm alternates between rounds, so a change of the machine's load hits both.
With `--leak N`: the worker's resident memory after one run and after N more, and its peak.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "bouncing_chain"


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def script_run(ws: Path) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "train.py"], cwd=ws, check=True, capture_output=True)
    return time.perf_counter() - t


def diagnose_run(ws: Path, worker: bool) -> tuple[float, dict]:
    env = {**os.environ, "WARPGRAD_WORKER": "1" if worker else "0"}
    t = time.perf_counter()
    p = subprocess.run([str(Path(sys.executable).parent / "warpgrad"), "diagnose", "train.py", "--json", "--no-record"],
                       cwd=ws, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    data = json.loads(p.stdout) if p.stdout.strip().startswith("{") else {"error": p.stderr[-2000:]}
    return wall, data


def worker_memory(pool) -> dict[str, int]:
    from warpgrad.tools import reaper

    launcher = pool.worker_pid()
    for pid in reaper.descendants(launcher) if launcher else []:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if b"tools.harness.worker" in cmd and b"reaper.py" not in cmd:
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            return {k: int(fields[k].split()[0]) for k in ("VmRSS", "VmHWM")}
    return {}


def compare_cases(case_ids: list[str]) -> list[dict]:
    """`run_diagnose` on suite cases through fresh processes and through a worker: the same verdicts?"""
    from warpgrad.evals.suite import SUITE_DIR, load_suite
    from warpgrad.tools.diagnose import DiagnoseArgs, run_diagnose
    from warpgrad.tools.worker import worker_pool

    suite = load_suite(SUITE_DIR)
    rows = []
    for case in [c for c in suite.cases if str(c.id) in case_ids]:
        ws = Path(tempfile.mkdtemp(prefix=f"bench-worker-{case.id}-")) / "ws"
        shutil.copytree(suite.root / "files" / str(case.id), ws)
        subprocess.run([sys.executable, case.entry], cwd=ws, capture_output=True, check=False)  # the cache
        args = DiagnoseArgs(script=case.entry, record=False, timeout_s=300)
        seen = {}
        for side in ("cold", "warm", "cold", "warm"):
            with (worker_pool() if side == "warm" else contextlib.nullcontext()):
                t = time.perf_counter()
                r = run_diagnose(args, ws)
                t = time.perf_counter() - t
            top = [(h.title, h.file, h.line, round(h.score, 3)) for h in r.hypotheses[:5]]
            seen.setdefault(side, []).append({"s": round(t, 2), "verdict": (r.gradients_wrong, r.signature),
                                              "top5": top})
        same = all(x["verdict"] == seen["cold"][0]["verdict"] and x["top5"] == seen["cold"][0]["top5"]
                   for x in seen["cold"] + seen["warm"])
        rows.append({"case": str(case.id), "same": same, **seen})
        print(json.dumps(rows[-1]), flush=True)
        shutil.rmtree(ws.parent, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", nargs="*", help="Instead: compare diagnose's verdicts on these suite cases.")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--leak", type=int, default=0, help="Runs for the memory check (0: skip).")
    ap.add_argument("--diagnose", action="store_true")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.cases:
        rows = compare_cases(a.cases)
        if a.out:
            a.out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
        return

    from warpgrad.tools import child_process
    from warpgrad.tools.gradcheck import GradcheckArgs, check
    from warpgrad.tools.run_script import RunScriptArgs, run_script
    from warpgrad.tools.worker import worker_pool

    tmp = Path(tempfile.mkdtemp(prefix="bench-worker-"))
    ws = tmp / "ws"
    shutil.copytree(EXAMPLE, ws)
    run_args = RunScriptArgs(script="train.py", record=False)
    gc_args = GradcheckArgs(script="train.py", record=False)
    script_run(ws)  # fills the kernel cache
    rows: dict[str, list[float]] = {k: [] for k in ("script", "run_cold", "run_warm", "gradcheck_cold",
                                                     "gradcheck_warm", "diagnose_cold", "diagnose_warm")}
    verdicts: dict[str, set] = {"cold": set(), "warm": set(), "diagnose_cold": set(), "diagnose_warm": set()}
    check(gc_args, ws)  # the FD evaluations' modules too
    result: dict = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "reps": a.reps}
    with worker_pool() as pool:
        assert pool is not None, "WARPGRAD_WORKER=0 is set"
        boot_s, _ = timed(lambda: run_script(run_args, ws))
        result["first_warm_run_s"] = round(boot_s, 3)
        for rep in range(a.reps):
            rows["script"].append(script_run(ws))
            order = ["cold", "warm"] if rep % 2 == 0 else ["warm", "cold"]
            for side in order:
                # The pool is active throughout; the cold side switches it off for its own calls.
                runner = None if side == "cold" else pool.run
                saved = child_process.set_warm_runner(runner)
                try:
                    t, _ = timed(lambda: run_script(run_args, ws))
                    rows[f"run_{side}"].append(t)
                    t, g = timed(lambda: check(gc_args, ws))
                    rows[f"gradcheck_{side}"].append(t)
                    verdicts[side].add((g.passed, g.signature, tuple((p.role, p.ad, p.fd) for p in g.params)))
                finally:
                    child_process.set_warm_runner(saved)
            if a.diagnose:
                for side in order:
                    t, d = diagnose_run(ws, side == "warm")
                    rows[f"diagnose_{side}"].append(t)
                    verdicts[f"diagnose_{side}"].add((d.get("gradients_wrong"), d.get("signature")))
            print(f"round {rep + 1}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in rows.items() if v), flush=True)
        if a.leak:
            run_script(run_args, ws)
            before = worker_memory(pool)
            for _ in range(a.leak):
                run_script(run_args, ws)
            after = worker_memory(pool)
            result["leak"] = {"runs": a.leak, "before_kib": before, "after_kib": after}
        result["served"] = pool.served
        result["spawned"] = pool.spawned
    med = {k: round(statistics.median(v), 3) for k, v in rows.items() if v}
    script = med["script"]
    result["median_s"] = med
    result["ratio_to_script"] = {k: round(v / script, 2) for k, v in med.items()}
    result["raw_s"] = {k: [round(x, 3) for x in v] for k, v in rows.items() if v}
    result["same_verdicts"] = verdicts["cold"] == verdicts["warm"] and len(verdicts["cold"]) == 1
    if a.diagnose:
        result["same_diagnose_verdicts"] = verdicts["diagnose_cold"] == verdicts["diagnose_warm"]
    print(json.dumps(result, indent=2))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
