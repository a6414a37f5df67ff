"""What the per-run kernel caches cost a one-shot `warpgrad diagnose` (`tools/kernel_cache.py`, issue 25).

    python bench/bench_kernel_seed.py --baseline DIR [--script examples/bouncing_chain/train.py] [--reps 4]
        [--user-cache ~/.cache/warp] [--fake-modules 1000] [--patch]

Runs `warpgrad diagnose SCRIPT --json --no-record` in a copy of the script's folder, alternating this checkout
and `DIR/warpgrad` (an export of another commit) and reversing the order every round, after one untimed run of
each. Each command runs in a child that prints its own rusage at exit (the CLI process: where the seeding, the
harvest and the temp dirs' removal run) and is timed from outside; the machine's busy core-seconds over the
command come from /proc/stat (other jobs on the machine count too: read them with the load average).

The user's Warp cache is a copy of `--user-cache` with `--fake-modules` module folders added (`wp_fake_<i>/`,
three small files each, as a user who ran many other programs has), pointed at by `WARP_CACHE_PATH`; each side
has its own private root (`WARPGRAD_KERNEL_CACHE`) beside the default one (under ~/.cache, the file system
the default lies on). `--patch` appends a comment to the script before each timed command: a new version of
the code (a new private cache) every time. Prints one line per command and the medians.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# In the child: the CLI in-process, its own rusage printed at exit.
WRAP = r"""
import atexit, resource, sys
def report():
    r = resource.getrusage(resource.RUSAGE_SELF)
    print(f"RUSAGE user={r.ru_utime:.2f} sys={r.ru_stime:.2f}", file=sys.stderr)
atexit.register(report)
from warpgrad.cli.main import main
sys.argv = ["warpgrad", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
"""


def busy_core_s() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def run(pythonpath: Path, workdir: Path, script: str, env_extra: dict[str, str]) -> dict[str, float]:
    env = os.environ | env_extra | {"PYTHONPATH": str(pythonpath)}
    b0, t0 = busy_core_s(), time.perf_counter()
    out = subprocess.run([sys.executable, "-c", WRAP, "diagnose", script, "--json", "--no-record"], cwd=workdir,
                         env=env, capture_output=True, text=True, timeout=900, check=False)
    wall, busy = time.perf_counter() - t0, busy_core_s() - b0
    m = re.search(r"RUSAGE user=([\d.]+) sys=([\d.]+)", out.stderr)
    if m is None:
        raise SystemExit(f"no rusage line; stderr tail:\n{out.stderr[-2000:]}")
    return {"wall": wall, "user": float(m.group(1)), "sys": float(m.group(2)), "busy": busy,
            "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, required=True, help="a folder holding another warpgrad as `warpgrad/`")
    ap.add_argument("--script", type=Path, default=ROOT / "examples" / "bouncing_chain" / "train.py")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--user-cache", type=Path, default=Path.home() / ".cache" / "warp")
    ap.add_argument("--fake-modules", type=int, default=0)
    ap.add_argument("--patch", action="store_true")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-kernel-seed-"))
    roots = Path(tempfile.mkdtemp(prefix="bench-kernel-seed-", dir=Path.home() / ".cache"))
    try:
        ws = work / "ws"
        shutil.copytree(args.script.resolve().parent, ws, ignore=shutil.ignore_patterns("__pycache__", ".warpgrad"))
        user = work / "user-cache"
        if args.user_cache.is_dir():
            shutil.copytree(args.user_cache, user, symlinks=True)
        version = __import__("warpgrad.tools.kernel_cache", fromlist=["x"]).warp_version() or "0"
        for i in range(args.fake_modules):
            d = user / version / f"wp_fake_{i}"
            d.mkdir(parents=True)
            for ext in (".cpp", ".cpu0.o", ".meta"):
                (d / f"wp_fake_{i}{ext}").write_bytes(b"x" * 100)
        spec = importlib.util.find_spec("warpgrad")  # the folder on PYTHONPATH that holds this checkout
        this = Path(spec.origin).parent.parent if spec is not None and spec.origin else ROOT.parent
        sides = {"baseline": args.baseline.resolve(), "this": this}
        results: dict[str, list[dict[str, float]]] = {s: [] for s in sides}
        for rnd in range(args.reps + 1):
            for side in (list(sides) if rnd % 2 else list(sides)[::-1]):
                if args.patch:
                    with (ws / args.script.name).open("a", encoding="utf-8") as f:
                        f.write(f"# patch {side} {rnd}\n")
                r = run(sides[side], ws, args.script.name,
                        {"WARP_CACHE_PATH": str(user), "WARPGRAD_KERNEL_CACHE": str(roots / side)})
                if rnd == 0:
                    continue  # untimed: fills the caches
                results[side].append(r)
                print(side, " ".join(f"{k}={v:.2f}" for k, v in r.items()), flush=True)
        for side, rows in results.items():
            print("median", side, " ".join(f"{k}={statistics.median(r[k] for r in rows):.2f}" for k in rows[0]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(roots, ignore_errors=True)


if __name__ == "__main__":
    main()
