"""A/B: `diagnose` of two warpgrad checkouts on one program, interleaved, against the script's own run.

Run: `python bench/ab_diagnose.py --folder DIR --entry train.py --base /path/to/base/.venv/bin/python
[--new .venv/bin/python] [--reps 4]`

On a machine shared with other work the load moves between two benchmark runs more than a change moves
`diagnose`; here the base and the new checkout's `diagnose` alternate on a copy of the same folder, with
one run of the script between each pair, in one kernel cache (each side warmed once first). Prints the
wall times, their medians, and each side's verdict, signature and top five hypotheses (file:line, rule,
score), which must agree.
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

CHILD = """
import json, sys, time
from pathlib import Path
from warpgrad.tools.diagnose import DiagnoseArgs, run_diagnose
ws, entry = Path(sys.argv[1]), sys.argv[2]
r = run_diagnose(DiagnoseArgs(script=entry, record=False, timeout_s=600), ws)
print(json.dumps({"timings": r.timings, "signature": r.signature, "gradients_wrong": r.gradients_wrong,
                  "top": [f"{h.file}:{h.line}:{h.rule}:{h.score}" for h in r.hypotheses[:5]]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", type=Path, required=True, help="The program's folder (copied).")
    ap.add_argument("--entry", required=True, help="The training script, relative to the folder.")
    ap.add_argument("--base", required=True, help="Python of the base checkout's venv.")
    ap.add_argument("--new", default=sys.executable, help="Python of the new checkout's venv (default: this one).")
    ap.add_argument("--reps", type=int, default=4)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="wg-ab-diagnose-"))
    try:
        ws = work / "ws"
        shutil.copytree(a.folder, ws)
        env = dict(os.environ, WARP_CACHE_PATH=str(work / "cache"))
        pythons = {"base": a.base, "new": a.new}

        def timed(argv: list[str]) -> tuple[float, str]:
            t = time.perf_counter()
            p = subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True, timeout=3600, check=False)
            if p.returncode != 0:
                raise SystemExit(f"{argv[0]} failed:\n{p.stderr[-3000:]}")
            return time.perf_counter() - t, p.stdout

        def diagnose(side: str) -> tuple[float, dict]:
            wall, out = timed([pythons[side], "-c", CHILD, str(ws), a.entry])
            return wall, json.loads(out.strip().splitlines()[-1])

        timed([a.new, a.entry])
        diagnose("base")
        diagnose("new")
        walls: dict[str, list[float]] = {"base": [], "new": [], "script": []}
        seen: dict[str, set] = {"base": set(), "new": set()}
        for _ in range(a.reps):
            for side in ("base", "new"):
                wall, r = diagnose(side)
                walls[side].append(round(wall, 2))
                seen[side].add(json.dumps([r["signature"], r["gradients_wrong"], r["top"]]))
            walls["script"].append(round(timed([a.new, a.entry])[0], 2))
        med = {k: statistics.median(v) for k, v in walls.items()}
        print(json.dumps({"walls": walls, "median": med, "ratio_base": med["base"] / med["script"],
                          "ratio_new": med["new"] / med["script"], "same_verdicts": seen["base"] == seen["new"],
                          "verdicts": {k: sorted(v) for k, v in seen.items()}}, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
