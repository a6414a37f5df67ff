"""Independent float64 finite-difference labeller for the blind eval cases.

It does not use warpgrad's engine. For one case it stages the fixture (optionally overlaid with the
reference fix) in a temporary folder, imports the case's probe from there and compares the gradient
the program's update consumes (``probe.grad()``) with central finite differences of the objective
the program reports (``probe.loss()``), along seeded random directions and, for small parameters,
per element.

Probe interface (the one every blind case's ``graders/<id>/probe.py`` follows)::

    params() -> dict[str, wp.array | np.ndarray]   # live storage the optimizer updates
    grad()   -> dict[str, np.ndarray]              # what the update consumes, same shapes
    loss()   -> float                              # reported full-horizon objective, float64,
                                                   # read from the current contents of params()
    script_loss() -> float                         # optional: the script's own (float32) value

The perturbation is written into the parameters' own storage. Because that storage is usually
float32, the directional check compares ``AD . (x+ - x-)`` with ``loss(x+) - loss(x-)`` using the
perturbation actually stored, so float32 rounding of the step does not bias the ratio; the loss is
float64, so the difference is not swamped by rounding either.

Usage::

    python evals/blind/label.py CASE_ID                 # the fixture as shipped
    python evals/blind/label.py CASE_ID --fixed         # overlaid with graders/CASE_ID/fixed/
    python evals/blind/label.py --all [--fixed]         # every case with a probe
    options: --eps 1e-4 (relative step) --directions 4 --seed 0 --json OUT

Labels derived: correct, zero, nan_inf, exact_factor (with the factor), sparse_subset, subtly_wrong,
inconclusive. ``grows_across_iterations`` and ``truncation`` need more than one objective and are
not derived here (the blind-a cases do not use them).
"""

from __future__ import annotations

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
REL_TOL = 1e-3  # a direction agrees when |AD.v - FD.v| <= REL_TOL * max(|FD.v|, 0.05 * max_dirs |FD.v|)
PER_ELEMENT_MAX = 64  # per-element FD for parameters with at most this many scalars


def _host(a) -> np.ndarray:
    """Float64 copy of a parameter's current contents (vector dtypes become a trailing axis)."""
    if isinstance(a, np.ndarray):
        return a.astype(np.float64)
    # a copy: on the CPU a.numpy() is a view of the storage, and for float64 storage asarray would
    # return that view itself, so the "baseline" would move with every perturbation
    return np.array(a.numpy(), dtype=np.float64, copy=True)


def _store(a, values: np.ndarray) -> None:
    """Write values into the parameter's own storage (rounded to its dtype)."""
    if isinstance(a, np.ndarray):
        a[...] = values.astype(a.dtype)
        return
    import warp as wp

    src = wp.array(
        values.astype(np.float32 if a.dtype != wp.float64 else np.float64), dtype=a.dtype, device=a.device
    )
    wp.copy(a, src)


def _load_probe(case: str, fixed: bool, stage: Path):
    ws = SUITE / "files" / case
    shutil.copytree(ws, stage, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    if fixed:
        fx = SUITE / "graders" / case / "fixed"
        if not fx.is_dir():
            raise SystemExit(f"{case}: no fixed/ folder")
        shutil.copytree(fx, stage, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    os.chdir(stage)
    sys.path.insert(0, str(stage))
    spec = importlib.util.spec_from_file_location("probe", SUITE / "graders" / case / "probe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _classify(dirs: list[dict], elems: dict[str, dict], ad_finite: bool, ad_all_zero: bool) -> dict:
    if not ad_finite:
        return {"signature": "nan_inf"}
    fd = np.array([d["fd"] for d in dirs])
    ad = np.array([d["ad"] for d in dirs])
    if np.all(np.abs(fd) < 1e-12):
        return {"signature": "inconclusive", "why": "FD is zero along every direction"}
    if ad_all_zero:
        return {"signature": "zero"}
    rel = np.array([d["rel_err"] for d in dirs])
    if np.all(rel < REL_TOL):
        return {"signature": "correct"}
    ratio = ad / fd
    if np.all(np.abs(ratio / ratio.mean() - 1.0) < REL_TOL) and abs(ratio.mean() - 1.0) > 1e-2:
        return {"signature": "exact_factor", "factor": float(ratio.mean())}
    # sparse subset: some elements exact, the others exactly zero although FD is not
    ok = zero = other = 0
    for e in elems.values():
        for a_i, f_i in zip(e["ad"], e["fd"]):
            if abs(f_i) < 1e-9 * max(1.0, np.max(np.abs(e["fd"]))):
                continue
            if abs(a_i - f_i) <= 1e-3 * abs(f_i):
                ok += 1
            elif a_i == 0.0:
                zero += 1
            else:
                other += 1
    if elems and ok and zero and not other:
        return {"signature": "sparse_subset", "elements_exact": ok, "elements_zero": zero}
    return {"signature": "subtly_wrong"}


def label(case: str, fixed: bool, eps: float, n_dirs: int, seed: int) -> dict:
    stage = Path(tempfile.mkdtemp(prefix=f"label-{case}-"))
    cwd = os.getcwd()
    try:
        probe = _load_probe(case, fixed, stage)
        p = probe.params()
        x0 = {k: _host(v) for k, v in p.items()}
        g = {k: np.asarray(v, dtype=np.float64).reshape(x0[k].shape) for k, v in probe.grad().items()}
        for k, a in p.items():  # grad() must leave the parameters where it found them
            _store(a, x0[k])
        base = float(probe.loss())
        out: dict = {"case": case, "fixed": fixed, "eps_rel": eps, "loss": base}
        if hasattr(probe, "script_loss"):
            s = float(probe.script_loss())
            out["script_loss"] = s
            out["loss_vs_script_rel"] = abs(base - s) / max(abs(s), 1e-300)
        ad_finite = all(np.all(np.isfinite(v)) for v in g.values())
        ad_all_zero = all(np.all(v == 0.0) for v in g.values())
        rng = np.random.default_rng(seed)
        scale = {k: np.maximum(np.abs(v), 1e-3 * max(np.max(np.abs(v)), 1e-6)) for k, v in x0.items()}

        def eval_at(delta: dict[str, np.ndarray]) -> tuple[float, dict[str, np.ndarray]]:
            for k, a in p.items():
                _store(a, x0[k] + delta.get(k, 0.0))
            stored = {k: _host(a) - x0[k] for k, a in p.items()}
            val = float(probe.loss())
            return val, stored

        def fd_along(delta: dict[str, np.ndarray]) -> tuple[float, float]:
            lp, sp = eval_at(delta)
            lm, sm = eval_at({k: -v for k, v in delta.items()})
            for k, a in p.items():
                _store(a, x0[k])
            ad = sum(float(np.sum(g[k] * (sp[k] - sm[k]))) for k in p)
            return ad, lp - lm

        dirs = []
        for d in range(n_dirs):
            delta = {k: eps * scale[k] * rng.standard_normal(x0[k].shape) for k in p}
            ad, fd = fd_along(delta)
            dirs.append({"dir": d, "ad": ad, "fd": fd, "ratio": ad / fd if fd != 0 else float("nan")})
        # A direction almost orthogonal to the gradient has a tiny FD.v, and the float32 noise of the
        # program's own gradient dominates its relative error: judge it against 5% of the largest FD.v.
        floor = 0.05 * max(abs(d["fd"]) for d in dirs)
        for d in dirs:
            d["rel_err"] = abs(d["ad"] - d["fd"]) / max(abs(d["fd"]), floor, 1e-300)
        elems: dict[str, dict] = {}
        for k in p:
            if x0[k].size > PER_ELEMENT_MAX:
                continue
            ad_e, fd_e = [], []
            for idx in np.ndindex(x0[k].shape):
                delta = {k: np.zeros_like(x0[k])}
                delta[k][idx] = eps * scale[k][idx]
                lp, sp = eval_at(delta)
                lm, sm = eval_at({k: -delta[k]})
                h = sp[k][idx] - sm[k][idx]
                fd_e.append((lp - lm) / h)
                ad_e.append(float(g[k][idx]))
            for kk, a in p.items():
                _store(a, x0[kk])
            elems[k] = {"ad": ad_e, "fd": fd_e, "shape": list(x0[k].shape)}
        out["directions"] = dirs
        out["per_element"] = elems
        out["ad_finite"] = ad_finite
        out.update(_classify(dirs, elems, ad_finite, ad_all_zero))
        return out
    finally:
        os.chdir(cwd)
        shutil.rmtree(stage, ignore_errors=True)


def _summary(r: dict) -> str:
    lines = [
        f"{r['case']}{' (fixed)' if r['fixed'] else ''}: {r['signature']}"
        + (f" factor={r['factor']:.6g}" if "factor" in r else "")
    ]
    lines.append(
        f"  loss={r['loss']:.10g}"
        + (
            f" script_loss={r['script_loss']:.7g} rel={r['loss_vs_script_rel']:.1e}"
            if "script_loss" in r
            else ""
        )
    )
    for d in r["directions"]:
        lines.append(
            f"  dir {d['dir']}: AD.v={d['ad']:+.6e} FD.v={d['fd']:+.6e} ratio={d['ratio']:.6g} "
            f"rel_err={d['rel_err']:.2e}"
        )
    for k, e in r["per_element"].items():
        # vector parameters: one row per lane, so a tiny lane is not hidden by a large one
        shape = e["shape"] if len(e["shape"]) > 1 else e["shape"] + [1]
        ad = np.array(e["ad"]).reshape(-1, shape[-1])
        fd = np.array(e["fd"]).reshape(-1, shape[-1])
        for lane in range(shape[-1]):
            a, f = ad[:, lane], fd[:, lane]
            err = np.abs(a - f) / np.maximum(np.abs(f), max(0.05 * np.max(np.abs(f)), 1e-300))
            name = k if shape[-1] == 1 else f"{k}[:, {lane}]"
            lines.append(
                f"  per-element {name}: n={a.size} max rel err={np.max(err):.2e} "
                f"(floor 5% of max |FD| in the lane)"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", nargs="?")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--fixed", action="store_true", help="overlay graders/<case>/fixed/")
    ap.add_argument("--eps", type=float, default=1e-4, help="relative step")
    ap.add_argument("--directions", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="print per-element AD and FD")
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--suite", type=Path, default=None, help="another suite folder of the same layout (evals/blind3)"
    )
    a = ap.parse_args(argv)
    if a.suite is not None:
        global SUITE  # noqa: PLW0603 -- every function reads SUITE; --suite repoints them all
        SUITE = a.suite.resolve()
    if a.all:
        cases = sorted(p.parent.name for p in (SUITE / "graders").glob("*/probe.py"))
    elif a.case:
        cases = [a.case]
    else:
        ap.error("give a CASE_ID or --all")
    results = []
    for c in cases:
        # each case in its own interpreter: probes import modules with the same names
        if len(cases) > 1:
            import subprocess

            cmd = [
                sys.executable,
                __file__,
                c,
                "--eps",
                str(a.eps),
                "--directions",
                str(a.directions),
                "--seed",
                str(a.seed),
                "--suite",
                str(SUITE),
            ] + (["--fixed"] if a.fixed else [])
            subprocess.run(cmd, check=False)
            continue
        r = label(c, a.fixed, a.eps, a.directions, a.seed)
        results.append(r)
        print(_summary(r))
        if a.verbose:
            for k, e in r["per_element"].items():
                for i, (x, y) in enumerate(zip(e["ad"], e["fd"])):
                    print(f"    {k}[{i}] AD={x:+.6e} FD={y:+.6e}")
    if a.json:
        a.json.write_text(json.dumps(results, indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
