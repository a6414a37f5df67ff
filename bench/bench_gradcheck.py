"""Benchmark: warpgrad's FD check against `warp.autograd.gradcheck` on the same forward, and capture overhead.

Run: `python bench/bench_gradcheck.py [--sizes 10 100 1000 10000] [--out bench/results/gradcheck.json]`

Measured in one run on one machine, reported as ratios:
1. forward evaluations and wall time of warpgrad (capture on the training script, and probe mode on
   the same forward) vs `warp.autograd.gradcheck` (2 + 2N forward calls) at each parameter count,
   with both verdicts;
2. the capture run's wall time over the script's own run for the same iterations (warm kernel cache);
3. the first check on a cold kernel cache vs a repeated one (kernels compile once, not per evaluation).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PROGRAM = '''\
import numpy as np
import warp as wp
import warp.optim

N = {n}
STEPS = 8
ITERS = 3


@wp.kernel
def step(x: wp.array(dtype=float), p: wp.array(dtype=float), x_out: wp.array(dtype=float)):
    i = wp.tid()
    x_out[i] = x[i] + 0.05 * wp.sin(p[i] + x[i])


@wp.kernel
def sq(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i] / float(N))


def forward(p, loss):
    xs = [wp.full(N, 0.5, dtype=float, requires_grad=True)] + [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS)]
    for s in range(STEPS):
        wp.launch(step, N, inputs=[xs[s], p], outputs=[xs[s + 1]])
    wp.launch(sq, N, inputs=[xs[STEPS]], outputs=[loss])


p = wp.array(np.linspace(-1.0, 1.0, N).astype(np.float32), dtype=float, requires_grad=True)


def main():
    opt = warp.optim.SGD([p], lr=0.1)
    for it in range(ITERS):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            forward(p, loss)
        tape.backward(loss)
        opt.step([p.grad])
        tape.zero()
        print(f"iter {{it}} loss {{loss.numpy()[0]:.6f}}")


if __name__ == "__main__":
    main()
'''

PROBE = '''\
import warp as wp
import train


def params():
    return {"p": train.p}


def loss():
    l = wp.zeros(1, dtype=float, requires_grad=True)
    train.forward(train.p, l)
    return float(l.numpy()[0])


def grad():
    l = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        train.forward(train.p, l)
    tape.backward(l)
    g = train.p.grad.numpy().copy()
    tape.zero()
    return {"p": g}
'''

WARP_CHECK = '''\
import json, sys, time
import warp as wp
import warp.autograd
sys.path.insert(0, sys.argv[1])
import train

calls = 0
def f(p):
    global calls
    calls += 1
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    train.forward(p, loss)
    return loss

f(train.p)  # warm: kernels loaded
calls = 0
t = time.perf_counter()
ok = wp.autograd.gradcheck(f, inputs=[train.p], eps=1e-3, atol=1e-3, rtol=1e-2,
                           raise_exception=False, show_summary=False)
print(json.dumps({"passed": bool(ok), "forward_calls": calls, "wall_s": time.perf_counter() - t}))
'''


def _run_json(argv: list[str], env: dict) -> dict:
    p = subprocess.run(argv, capture_output=True, text=True, encoding="utf-8", env=env, timeout=3600, check=False)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def bench_size(n: int, env: dict) -> dict:
    from warpgrad.tools.gradcheck import GradcheckArgs, check

    ws = Path(tempfile.mkdtemp(prefix=f"wg-bench-{n}-"))
    (ws / "train.py").write_text(PROGRAM.format(n=n), encoding="utf-8")
    (ws / "probe.py").write_text(PROBE, encoding="utf-8")
    (ws / "warp_check.py").write_text(WARP_CHECK, encoding="utf-8")
    warp = _run_json([sys.executable, str(ws / "warp_check.py"), str(ws)], env)
    t = time.perf_counter()
    cap = check(GradcheckArgs(script="train.py", record=False), ws)
    cap_wall = time.perf_counter() - t
    t = time.perf_counter()
    prb = check(GradcheckArgs(probe="probe.py", record=False), ws)
    prb_wall = time.perf_counter() - t
    shutil.rmtree(ws, ignore_errors=True)
    return {
        "params": n,
        "warp": warp,
        "capture": {"passed": cap.passed, "signature": cap.signature, "evaluations": cap.evaluations, "wall_s": cap_wall},
        "probe": {"passed": prb.passed, "signature": prb.signature, "evaluations": prb.evaluations, "wall_s": prb_wall},
        "eval_ratio_warp_over_capture": warp["forward_calls"] / cap.evaluations,
    }


def bench_overhead(env: dict, n: int = 1000) -> dict:
    """Capture run (stops at the start of iteration 2) vs the script's own run of the same 2 iterations."""
    from warpgrad.tools.child_process import run_harness, run_process
    from warpgrad.tools.harness.protocol import CaptureConfig, CaptureOptions, CaptureResult

    ws = Path(tempfile.mkdtemp(prefix="wg-bench-ovh-"))
    (ws / "train.py").write_text(PROGRAM.format(n=n).replace("ITERS = 3", "ITERS = 2"), encoding="utf-8")
    own, cap = [], []
    for _ in range(3):
        own.append(run_process([sys.executable, "train.py"], cwd=ws, env=env).wall_s)
        cfg = CaptureConfig(workspace=str(ws), script=str(ws / "train.py"), outdir=str(ws),
                            capture=CaptureOptions(iteration=1))
        out = run_harness(cfg, CaptureResult, cwd=ws)
        cap.append(out.process.wall_s)
    shutil.rmtree(ws, ignore_errors=True)
    return {"script_s": min(own), "capture_s": min(cap), "ratio": min(cap) / min(own)}


def bench_cold_vs_warm(n: int = 100) -> dict:
    from warpgrad.tools.gradcheck import GradcheckArgs, check

    cache = tempfile.mkdtemp(prefix="wg-bench-cache-")
    old = os.environ.get("WARP_CACHE_PATH")
    os.environ["WARP_CACHE_PATH"] = cache
    ws = Path(tempfile.mkdtemp(prefix="wg-bench-cold-"))
    (ws / "train.py").write_text(PROGRAM.format(n=n).replace("0.05 * wp.sin", "0.0501 * wp.sin"), encoding="utf-8")
    try:
        t = time.perf_counter()
        first = check(GradcheckArgs(script="train.py", record=False), ws)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        check(GradcheckArgs(script="train.py", record=False), ws)
        warm = time.perf_counter() - t
    finally:
        if old is None:
            os.environ.pop("WARP_CACHE_PATH", None)
        else:
            os.environ["WARP_CACHE_PATH"] = old
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)
    return {"first_s": cold, "repeat_s": warm, "ratio": cold / warm, "evaluations": first.evaluations}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 10000])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "gradcheck.json")
    a = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("WARP_CACHE_PATH", str(Path(tempfile.gettempdir()) / "warpgrad-bench-cache"))
    os.environ["WARP_CACHE_PATH"] = env["WARP_CACHE_PATH"]
    results = {"sizes": [], "machine": {"cpus": os.cpu_count()}}
    for n in a.sizes:
        r = bench_size(n, env)
        print(json.dumps(r))
        results["sizes"].append(r)
    results["capture_overhead"] = bench_overhead(env)
    print(json.dumps(results["capture_overhead"]))
    results["cold_vs_warm"] = bench_cold_vs_warm()
    print(json.dumps(results["cold_vs_warm"]))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(textwrap.dedent(f"wrote {a.out}"))


if __name__ == "__main__":
    main()
