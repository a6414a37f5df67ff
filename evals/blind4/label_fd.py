"""Labeller (a) of blind set four: central FD of ``probe.loss()`` against ``probe.grad()``.

Written by the set's author without reading warpgrad's engine. Stages ``files/CASE`` (overlaid
with ``graders/CASE/fixed`` under ``--fixed``) in a temporary folder, imports the case's probe and
compares the gradient the program consumes with central differences of the float64 objective,
along random directions and per element, at relative steps 1e-2, 3e-3, 1e-3 and 3e-4 (the step
used is where two neighbouring steps agree best). The parameters are float32 arrays, so each
perturbation is rounded: AD is projected on the step actually taken. ``--set K=V`` exports
``PROBE_K=V`` for the probe (``ITERATION``, ``PREHEAT``: the sweeps in the notes).

    python evals/blind4/label_fd.py CASE [--fixed] [--set ITERATION=3] [--elements 40]

The last line is JSON: the one-iteration signature (``correct``, ``zero``, ``exact_factor F``,
``sparse_subset``, ``subtly_wrong``); accumulation and truncation are read off a sweep.
"""

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

SUITE = Path(__file__).resolve().parent
STEPS = [1e-2, 3e-3, 1e-3, 3e-4]


def pick(values):
    """The FD value at the finer of the two neighbouring steps that agree best."""
    if len(values) == 1:
        return values[0]
    i = min(range(len(values) - 1), key=lambda j: abs(values[j] - values[j + 1]))
    return values[i + 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--fixed", action="store_true")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--dirs", type=int, default=4)
    ap.add_argument("--elements", type=int, default=10)
    args = ap.parse_args()

    ws = tempfile.mkdtemp(prefix="blind4_")
    shutil.copytree(SUITE / "files" / args.case, ws, dirs_exist_ok=True)
    if args.fixed:
        shutil.copytree(SUITE / "graders" / args.case / "fixed", ws, dirs_exist_ok=True)
    os.chdir(ws)
    sys.path.insert(0, ws)
    for kv in args.set:
        key, value = kv.split("=")
        os.environ["PROBE_" + key] = value
    import warp as wp

    wp.config.quiet = True
    spec = importlib.util.spec_from_file_location("probe", SUITE / "graders" / args.case / "probe.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)

    params = probe.params()
    grad = {k: np.asarray(v, dtype=np.float64) for k, v in probe.grad().items()}
    base = {k: v.numpy().astype(np.float64).copy() for k, v in params.items()}
    print(f"loss {probe.loss():.8g}")

    def set_params(offset):
        for k, arr in params.items():
            arr.assign(np.asarray(base[k] + offset.get(k, 0.0), dtype=arr.numpy().dtype))

    def fd(direction):
        scale = max(1e-3, *(float(np.max(np.abs(base[k]))) for k in params))
        norm = max(float(np.sqrt(sum(np.sum(v * v) for v in direction.values()))), 1e-30)
        ad_dir = sum(float(np.sum(grad[k] * direction[k])) for k in params)
        out = []
        for step in STEPS:
            h = step * scale / norm
            set_params({k: h * v for k, v in direction.items()})
            lp = probe.loss()
            pp = {k: params[k].numpy().astype(np.float64) for k in params}
            set_params({k: -h * v for k, v in direction.items()})
            lm = probe.loss()
            pm = {k: params[k].numpy().astype(np.float64) for k in params}
            # AD along the rounded step actually taken, rescaled to the intended direction
            ad_taken = sum(float(np.sum(grad[k] * (pp[k] - pm[k]))) for k in params)
            out.append((lp - lm) * ad_dir / ad_taken if ad_taken else (lp - lm) / (2 * h))
        set_params({})
        return ad_dir, out

    rng = np.random.default_rng(0)
    ratios, rel = [], []
    for j in range(args.dirs):
        direction = {k: rng.standard_normal(base[k].shape) for k in params}
        ad, values = fd(direction)
        fdv = pick(values)
        ratios.append(ad / fdv if fdv else float("nan"))
        rel.append(abs(ad - fdv) / max(abs(fdv), 1e-30))
        print(f"dir {j}: AD {ad:.7g}  FD {[f'{x:.7g}' for x in values]}  ratio {ratios[-1]:.6f}")
    elements = []
    for k in params:
        flat = base[k].reshape(-1)
        for i in np.linspace(0, flat.size - 1, min(args.elements, flat.size)).astype(int):
            direction = {kk: np.zeros_like(base[kk]) for kk in params}
            direction[k].reshape(-1)[i] = 1.0
            ad, values = fd(direction)
            fdv = pick(values)
            elements.append((ad, fdv))
            print(f"  {k}[{i}] AD {ad:.7g} FD {fdv:.7g} ratio {ad / fdv if fdv else float('nan'):.6f}")

    r = np.array(ratios)
    if np.all(np.array(rel) < 1e-3):
        sig = "correct"
    elif all(abs(a) < 1e-12 for a, _ in elements) and any(abs(f) > 1e-9 for _, f in elements):
        sig = "zero"
    elif np.all(np.abs(r / r.mean() - 1) < 1e-3):
        sig = f"exact_factor {r.mean():.5f}"
    else:
        good = [abs(a - f) <= 1e-3 * max(abs(f), 1e-9) for a, f in elements]
        zero_bad = [abs(a) < 1e-12 and abs(f) > 1e-9 for a, f in elements]
        sparse = all(g or z for g, z in zip(good, zero_bad)) and any(zero_bad) and any(good)
        sig = "sparse_subset" if sparse else "subtly_wrong"
    result = {
        "case": args.case,
        "fixed": args.fixed,
        "set": args.set,
        "signature": sig,
        "ratios": [round(x, 6) for x in ratios],
        "max_rel_dir": float(max(rel)),
    }
    print(json.dumps(result))
    shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    main()
