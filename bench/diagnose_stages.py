"""Where a one-shot `warpgrad diagnose` spends its time, against the script's own run (issue 25).

Run: `python bench/diagnose_stages.py [--script examples/bouncing_chain/train.py | --program healthy_optim]
[--reps 3] [--no-served] [--baseline DIR] [--out bench/results/diagnose_stages.json]` (`--program NAME`: a program of
`tests/programs.py`, written into a folder of its own, e.g. `healthy_optim`, a correct one).

In a copy of the script's folder with a kernel cache of its own (`WARP_CACHE_PATH`), after one untimed run of
each (the cache fills, the tracker's instrumented build is made), `--reps` rounds, each timing in turn:
- `script`: `python SCRIPT`, the script's own run;
- `diagnose`: `warpgrad diagnose SCRIPT --json --no-record`, the one-shot CLI a user or a script calls;
- `traced`: the same command with every harness run, FD hub request and hub close, the worker's prewarm and
  the diagnose stages timed from inside (a wrapper around the functions, nothing else changed), written as a
  timeline: what starts when, what ends when, and what the result waited for last.
- `served`: the same command through the warm command server (`cli/warm`), started and warmed (one untimed
  command) before the rounds: what a user's second and later commands cost (`--no-served` skips it);
- `baseline` (with `--baseline DIR`): the one-shot command again with `PYTHONPATH=DIR`, another warpgrad
  (`DIR/warpgrad`, e.g. an export of an earlier commit), in the same rounds: a before/after comparison that
  a loaded machine cannot skew one way.
Each side has its own warpgrad kernel cache root (`WARPGRAD_KERNEL_CACHE`), so one side's builds never warm
the other's runs. The order reverses every round so a change of the machine's load hits each side. The ratio is the median
diagnose over the median script run of the same rounds. Wall seconds: the sandboxed harness processes are
not this process's children for CPU accounting.
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

from bench_speed import served_env, start_server  # this folder is on the path when a bench script runs

ROOT = Path(__file__).resolve().parent.parent
WARPGRAD = str(Path(sys.executable).parent / "warpgrad")
TIMEOUT_S = 900

# Runs `warpgrad diagnose` in this child process with the critical-path functions wrapped to log
# (name, start, end) relative to the process's start; the log goes to the file named in argv[1].
TRACED = r"""
import functools, json, sys, threading, time
T0 = time.perf_counter()
log, out_path = [], sys.argv[1]
lock = threading.Lock()

def wrap(owner, attr, label):
    fn = getattr(owner, attr)
    @functools.wraps(fn)
    def timed(*a, **k):
        t = time.perf_counter() - T0
        try:
            return fn(*a, **k)
        finally:
            name = label(a, k) if callable(label) else label
            with lock:
                log.append({"what": name, "start": round(t, 3), "end": round(time.perf_counter() - T0, 3),
                            "thread": threading.current_thread().name})
    setattr(owner, attr, timed)
    if isinstance(owner, type(sys)):  # a module's function: rebind every `from .x import f` of it too
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("warpgrad.") and getattr(mod, attr, None) is fn:
                setattr(mod, attr, timed)
    return fn

import warpgrad.cli.main as cli_main
log.append({"what": "import warpgrad CLI", "start": 0.0, "end": round(time.perf_counter() - T0, 3), "thread": "main"})
from warpgrad.tools import child_process, fd_hub, gradcheck, worker, diagnose

def mode(a, k):
    cfg = a[0]
    m = getattr(cfg, "mode", type(cfg).__name__)
    cap = getattr(cfg, "capture", None)
    if getattr(cap, "serve", None) is not None:
        return f"harness {m} (FD hub, iteration {cap.iteration})"
    if hasattr(cfg, "batch"):
        return f"harness batch of {len(cfg.batch)} FD evaluations"
    return f"harness {m}"

wrap(child_process, "run_harness", mode)
wrap(fd_hub.FdHub, "run", lambda a, k: f"FD hub request ({len(a[1])} evaluations)")
wrap(fd_hub.FdHub, "close", "FD hub close")
wrap(fd_hub.FdHub, "_connect", "FD hub connect (wait for its fork point)")
wrap(gradcheck._Evaluator, "close", "FD evaluator close (all hubs)")
wrap(gradcheck, "check_capture", "gradcheck (check_capture)")
wrap(worker.WorkerPool, "prewarm", "worker prewarm")
wrap(worker.WorkerPool, "close", "worker pool close")
for name in ("plain_run", "fd_check", "tracker", "rules", "conclude", "tape_for", "tracker_result"):
    wrap(diagnose._Stages, name, f"stage {name}")
wrap(diagnose, "run_diagnose", "run_diagnose")
wrap(diagnose._Stages, "stop_launch_checks", "stop the per-launch checks (written)")
wrap(diagnose._Stages, "after_first_verdict", lambda a, k: f"later iteration's verdict: passed={a[1].passed}")
try:
    sys.argv = ["warpgrad", *sys.argv[2:]]
    cli_main.main()
except SystemExit:
    pass
finally:
    log.append({"what": "process end", "start": round(time.perf_counter() - T0, 3),
                "end": round(time.perf_counter() - T0, 3), "thread": "main"})
    with open(out_path, "w") as f:
        json.dump(log, f)
"""


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=TIMEOUT_S, check=False)
    return time.perf_counter() - t


def _traced(entry: str, cwd: Path, env: dict[str, str], out: Path) -> tuple[float, list[dict]]:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", TRACED, str(out), "diagnose", entry, "--json", "--no-record"], cwd=cwd,
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=TIMEOUT_S, check=False)
    wall = time.perf_counter() - t
    return wall, json.loads(out.read_text(encoding="utf-8")) if out.is_file() else []


def timeline(events: list[dict]) -> str:
    lines = [f"{'start':>7} {'end':>7} {'s':>6}  what (thread)"]
    for e in sorted(events, key=lambda e: (e["start"], e["end"])):
        lines.append(f"{e['start']:7.2f} {e['end']:7.2f} {e['end'] - e['start']:6.2f}  {e['what']} ({e['thread']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--script", default="examples/bouncing_chain/train.py")
    ap.add_argument("--program", default=None, help="Time this program of tests/programs.py instead of --script "
                    "(e.g. healthy_optim, a correct program).")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "diagnose_stages.json"))
    ap.add_argument("--no-served", dest="served", action="store_false", help="Do not time the command through "
                    "the warm server.")
    ap.add_argument("--baseline", default=None, help="A folder holding another warpgrad (DIR/warpgrad) to time "
                    "in the same rounds.")
    a = ap.parse_args(argv)
    programs_dir = None
    if a.program:
        sys.path.insert(0, str(ROOT / "tests"))
        from programs import write_program

        programs_dir = tempfile.mkdtemp(prefix="wg-stages-program-")
        src = write_program(Path(programs_dir), a.program).resolve()
    else:
        src = (ROOT / a.script).resolve()
    times: dict[str, list[float]] = {"script": [], "diagnose": [], "traced": []}
    if a.served:
        times["served"] = []
    if a.baseline:
        times["baseline"] = []
    traces: list[list[dict]] = []
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="wg-stages-") as tmp:
        ws = Path(tmp) / "ws"
        shutil.copytree(src.parent, ws)
        # The one-shot sides run in their own process (the warm server off); `served` through a server of its own.
        env = {k: v for k, v in os.environ.items() if k not in ("WARPGRAD_WORKER", "CI")} | {"WARPGRAD_SERVER": "0"}
        env["WARP_CACHE_PATH"] = str(Path(tmp) / "kernels")
        # warpgrad's own kernel caches (per version of the code, `tools/kernel_cache.py`), one per side: a side that
        # hands its runs' builds to them must not warm the other side's runs.
        env["WARPGRAD_KERNEL_CACHE"] = str(Path(tmp) / "warpgrad-kernels")
        entry = src.name
        script = [sys.executable, entry]
        one_shot = [WARPGRAD, "diagnose", entry, "--json", "--no-record"]
        _timed(script, ws, env)  # fills the kernel cache
        _timed(one_shot, ws, env)  # warpgrad's own builds (the tracker's instrumented module)
        base_env = env | {"PYTHONPATH": str(Path(a.baseline).resolve()),
                          "WARPGRAD_KERNEL_CACHE": str(Path(tmp) / "baseline-kernels")} if a.baseline else env
        if a.baseline:
            _timed(one_shot, ws, base_env)
        served = served_env(env, Path(tmp) / "state")
        if a.served:
            start_server(served)
            _timed(one_shot, ws, served)  # the server boots this workspace's worker
        for r in range(a.reps):
            order = list(times)
            for kind in order if r % 2 == 0 else order[::-1]:
                if kind == "traced":
                    wall, events = _traced(entry, ws, env, Path(tmp) / f"trace{r}.json")
                    times[kind].append(wall)
                    traces.append(events)
                else:
                    side_env = {"baseline": base_env, "served": served}.get(kind, env)
                    times[kind].append(_timed(script if kind == "script" else one_shot, ws, side_env))
            print(f"round {r}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)
        if a.served:
            subprocess.run([WARPGRAD, "server", "stop"], env=served, capture_output=True, timeout=60, check=False)
    med = {k: round(statistics.median(v), 2) for k, v in times.items() if v}
    ratio = round(med["diagnose"] / med["script"], 2)
    served_ratio = round(med["served"] / med["script"], 2) if "served" in med else None
    if a.baseline:
        print(f"baseline ({a.baseline}): median {med['baseline']} s, {med['baseline'] / med['script']:.2f}x the script")
    # The trace of the median traced run.
    pick = sorted(range(len(traces)), key=lambda i: times["traced"][i])[len(traces) // 2] if traces else None
    if programs_dir:
        shutil.rmtree(programs_dir, ignore_errors=True)
    report = {"command": " ".join(["python", "bench/diagnose_stages.py", *(argv if argv is not None else sys.argv[1:])]),
              "script": f"tests/programs.py:{a.program}" if a.program else a.script, "reps": a.reps, "times_s": times, "median_s": med,
              "diagnose_over_script": ratio, "served_over_script": served_ratio, "load_average_start": load_start, "load_average": os.getloadavg(),
              "trace": traces[pick] if pick is not None else []}
    print(f"median: script {med['script']} s, diagnose {med['diagnose']} s, traced {med['traced']} s; "
          f"diagnose / script = {ratio}x" + (f", through the warm server {med['served']} s = {served_ratio}x"
                                             if served_ratio is not None else "") + f" (load average {load_start[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end)")
    if pick is not None:
        print(timeline(traces[pick]))
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
