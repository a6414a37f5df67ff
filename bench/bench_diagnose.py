"""Benchmark: what `warpgrad diagnose` costs over the script's own run, and how often it compiles.

Run: `python bench/bench_diagnose.py [--cases ID ...] [--jobs 1] [--reps 3] [--out bench/results/diagnose.json]`

For each positive case of the shipped suite, in a fresh kernel cache: run the script once (cold, to fill
the cache), then `diagnose` once (cold for warpgrad's own modules and the tracker's build), then `--reps`
times the script and `diagnose` alternately, so both see the same load; the ratio is the median diagnose
over the median script run (on a 2-core machine shared with other work, wall time swings 3x between two
runs of the same script; CPU seconds cannot replace it: the sandboxed harness processes are not reaped
through this process, so `wait4` does not count them). Cache entries are counted
per module: each entry is one build of one module hash; diagnose should add exactly one build per module
the script builds (the tracker's instrumented one).
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CHILD = """
import json, sys, time
from pathlib import Path
from warpgrad.tools.diagnose import DiagnoseArgs, run_diagnose
ws, entry = Path(sys.argv[1]), sys.argv[2]
t = time.perf_counter()
r = run_diagnose(DiagnoseArgs(script=entry, record=False, timeout_s=300), ws)
print(json.dumps({"wall_s": time.perf_counter() - t, "timings": r.timings, "signature": r.signature,
                  "gradients_wrong": r.gradients_wrong}))
"""


def _builds(cache: Path) -> dict[str, int]:
    """Distinct builds per module in a Warp kernel cache (one folder per module hash)."""
    out: dict[str, int] = {}
    for d in cache.rglob("wp_*"):
        if d.is_dir():
            name = d.name.rsplit("_", 1)[0]
            out[name] = out.get(name, 0) + 1
    return out


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds and stdout of one run."""
    t = time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800, check=False)
    return time.perf_counter() - t, p.stdout


def one(case_id: str, entry: str, suite: Path, reps: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"wg-benchdiag-{case_id}-"))
    ws, cache = work / "ws", work / "cache"
    shutil.copytree(suite / "files" / case_id, ws)
    env = dict(os.environ, WARP_CACHE_PATH=str(cache))
    diag = [sys.executable, "-c", CHILD, str(ws), entry]
    try:
        timed([sys.executable, entry], ws, env)  # fills the cache with the script's own modules
        script_builds = _builds(cache)
        cold_wall, _ = timed(diag, ws, env)  # warpgrad's own modules and the tracker's build
        scripts, diagnoses, last = [], [], {}
        for _ in range(reps):
            scripts.append(timed([sys.executable, entry], ws, env)[0])
            wall, out = timed(diag, ws, env)
            diagnoses.append(wall)
            last = json.loads(out.strip().splitlines()[-1])
        builds = _builds(cache)
        # Builds diagnose added per module of the script: the tracker's instrumented build is the expected one.
        extra = {m: builds.get(m, 0) - script_builds.get(m, 0) for m in script_builds}
        own, d = statistics.median(scripts), statistics.median(diagnoses)
        return {"case": case_id, "script_s": own, "diagnose_cold_s": cold_wall, "diagnose_s": d, "ratio": d / own,
                "runs": {"script": scripts, "diagnose": diagnoses},
                "timings": last.get("timings"), "signature": last.get("signature"),
                "gradients_wrong": last.get("gradients_wrong"), "script_builds": script_builds,
                "builds_after": builds, "max_extra_builds_per_module": max(extra.values(), default=0)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    from warpgrad.evals.suite import SUITE_DIR, load_suite

    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", nargs="*")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "diagnose.json")
    a = ap.parse_args()
    suite = load_suite(SUITE_DIR)
    cases = [c for c in suite.cases if c.should_trigger and (not a.cases or str(c.id) in a.cases)]
    with ThreadPoolExecutor(a.jobs) as pool:
        rows = list(pool.map(lambda c: one(str(c.id), c.entry, suite.root, a.reps), cases))
    for r in rows:
        print(json.dumps({k: r[k] for k in ("case", "script_s", "diagnose_cold_s", "diagnose_s", "ratio",
                                            "signature",
                                            "max_extra_builds_per_module")}))
    summary = {"median_ratio_warm": statistics.median(r["ratio"] for r in rows),
               "max_extra_builds_per_module": max(r["max_extra_builds_per_module"] for r in rows), "cases": len(rows)}
    print(json.dumps(summary))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
