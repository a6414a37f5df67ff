"""Benchmark: what `warpgrad diagnose` costs over the script's own run, and how often it compiles.

Run: `python bench/bench_diagnose.py [--cases ID ...] [--jobs 2] [--out bench/results/diagnose.json]`

For each positive case of the shipped suite, in a fresh kernel cache: run the script once (cold, to fill
the cache), time a second run (warm: the script's own cost), then time `diagnose` (warm for the plain
modules; the tracker run must build its own). Afterwards count the cache entries per module: each
entry is one compile of one module hash, so "never more than twice" means at most 2 entries per module
(plain and tracker-instrumented).
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


def one(case_id: str, entry: str, suite: Path) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"wg-benchdiag-{case_id}-"))
    ws, cache = work / "ws", work / "cache"
    shutil.copytree(suite / "files" / case_id, ws)
    env = dict(os.environ, WARP_CACHE_PATH=str(cache))
    try:
        subprocess.run([sys.executable, entry], cwd=ws, env=env, capture_output=True, timeout=600)
        t = time.perf_counter()
        subprocess.run([sys.executable, entry], cwd=ws, env=env, capture_output=True, timeout=600)
        own = time.perf_counter() - t
        p = subprocess.run([sys.executable, "-c", CHILD, str(ws), entry], cwd=ws, env=env, capture_output=True,
                           text=True, timeout=1800)
        diag = json.loads(p.stdout.strip().splitlines()[-1])
        per_module: dict[str, int] = {}
        for d in (cache).rglob("wp_*"):
            if d.is_dir():
                name = d.name.rsplit("_", 1)[0]
                per_module[name] = per_module.get(name, 0) + 1
        return {"case": case_id, "script_s": own, "diagnose_s": diag["wall_s"], "ratio": diag["wall_s"] / own,
                "timings": diag["timings"], "max_compiles_per_module": max(per_module.values(), default=0),
                "compiles": per_module}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    from warpgrad.evals.suite import SUITE_DIR, load_suite

    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", nargs="*")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "diagnose.json")
    a = ap.parse_args()
    suite = load_suite(SUITE_DIR)
    cases = [c for c in suite.cases if c.should_trigger and (not a.cases or str(c.id) in a.cases)]
    with ThreadPoolExecutor(a.jobs) as pool:
        rows = list(pool.map(lambda c: one(str(c.id), c.entry, suite.root), cases))
    for r in rows:
        print(json.dumps({k: r[k] for k in ("case", "script_s", "diagnose_s", "ratio", "max_compiles_per_module")}))
    summary = {"median_ratio": statistics.median(r["ratio"] for r in rows),
               "max_compiles_per_module": max(r["max_compiles_per_module"] for r in rows), "cases": len(rows)}
    print(json.dumps(summary))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
