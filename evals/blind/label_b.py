"""Independent float64 finite-difference labeller for the blind cases written by blind-b.

It does not use warpgrad's engine. For one case it stages ``files/<case>/`` (optionally overlaid with
``graders/<case>/fixed/``) in a temporary folder, imports ``graders/<case>/probe.py`` from there and
compares the gradient the probe's ``grad()`` returns (what the script's update consumes) with central
finite differences of the probe's ``loss()`` (the full-horizon objective, recomputed in float64):

* along several seeded random directions (AD·v vs FD·v), with an eps sweep whose spread is the FD
  noise band, and
* per element when the parameters are small (at most ``--max-elements`` scalars in all).

The perturbation actually stored in the parameter arrays (float32 parameters round it) is what the
directional derivative is taken along, so float32 storage does not bias the comparison.

``--sweep ATTR=v1,v2,...`` repeats the check in fresh subprocesses with a probe attribute set to each
value (``ITERATION`` for accumulation bugs, ``HORIZON`` for truncation) and labels the trend.

    python evals/blind/label_b.py CASE                      # label the fixture as shipped
    python evals/blind/label_b.py CASE --fixed              # the reference fix must come out correct
    python evals/blind/label_b.py CASE --sweep ITERATION=0,3
    python evals/blind/label_b.py --all                     # every blind-b case, shipped and fixed
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SUITE = Path(__file__).resolve().parent
REL_TOL = 1e-3

# The cases blind-b wrote, with the extra arguments their label needs (a sweep for the
# iteration- and horizon-dependent signatures).
CASES = {
    "buoy_mooring_lines": [],
    "fireworks_shell_timing": ["--sweep", "ITERATION=0,1,3"],
    "hanging_chain_swing": [],
    "orbit_insertion_burn": [],
    "pendulum_bank_damping": [],
    "quarter_car_damper_fit": [],
    "satellite_slot_rephasing": [],
    "spring_lattice_release": [],
    "star_cluster_cold_collapse": [],
    "warehouse_crate_push": [],
    "weather_balloon_ascent": ["--sweep", "HORIZON=2,5,20,80"],
}
EPS_SWEEP = (1e-3, 1e-4, 1e-5, 1e-6)


def _stage(case: str, fixed: bool) -> Path:
    ws = Path(tempfile.mkdtemp(prefix=f"label_b_{case}_"))
    shutil.copytree(SUITE / "files" / case, ws, dirs_exist_ok=True)
    if fixed:
        fix = SUITE / "graders" / case / "fixed"
        if not fix.is_dir():
            raise SystemExit(f"{case} has no fixed/ overlay")
        shutil.copytree(fix, ws, dirs_exist_ok=True)
    return ws


def _import_probe(case: str, ws: Path):
    os.chdir(ws)
    sys.path.insert(0, str(ws))
    spec = importlib.util.spec_from_file_location("probe_under_label", SUITE / "graders" / case / "probe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Objective:
    """Evaluates the probe's loss with the parameters set to flat float64 vectors."""

    def __init__(self, probe):
        self.probe = probe
        self.arrays = probe.params()
        self.names = list(self.arrays)
        self.base = {n: self.arrays[n].numpy().copy() for n in self.names}
        self.sizes = [self.base[n].size for n in self.names]

    def flat(self, values: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([np.asarray(values[n], dtype=np.float64).ravel() for n in self.names])

    def _set(self, flat: np.ndarray) -> np.ndarray:
        """Store ``flat`` in the live arrays; return what was actually stored (after dtype rounding)."""
        stored = []
        off = 0
        for n, size in zip(self.names, self.sizes):
            arr = self.arrays[n]
            host = flat[off : off + size].reshape(self.base[n].shape).astype(self.base[n].dtype)
            arr.assign(host)
            stored.append(host.astype(np.float64).ravel())
            off += size
        return np.concatenate(stored)

    def restore(self) -> None:
        for n in self.names:
            self.arrays[n].assign(self.base[n])

    def at(self, flat: np.ndarray) -> tuple[float, np.ndarray]:
        stored = self._set(flat)
        value = float(self.probe.loss())
        self.restore()
        return value, stored

    def directional(self, x0: np.ndarray, v: np.ndarray, eps: float) -> tuple[float, np.ndarray]:
        """Central difference along v; returns (dL, effective direction actually stored / eps)."""
        lp, xp = self.at(x0 + eps * v)
        lm, xm = self.at(x0 - eps * v)
        return (lp - lm) / (2.0 * eps), (xp - xm) / (2.0 * eps)


def _fd_with_sweep(obj: Objective, x0, v, g):
    """FD along v for each eps; pick the eps pair whose FD/AD ratios agree best.

    With float32 parameters the stored step differs from eps*v, so AD is projected on the step
    actually taken (AD.v_eff) and the stability of FD/(AD.v_eff) across neighbouring eps is the
    noise criterion (truncation error at large eps, cancellation at small eps). When AD.v_eff is 0
    the plain FD spread is used.
    """
    rows = []
    for eps in EPS_SWEEP:
        fd, veff = obj.directional(x0, v, eps)
        rows.append((eps, fd, float(g @ veff)))
    best = None
    for (e1, f1, a1), (_e2, f2, a2) in itertools.pairwise(rows):
        if a1 != 0.0 and a2 != 0.0 and np.isfinite(a1) and np.isfinite(a2):
            spread = abs(f1 / a1 - f2 / a2) * abs(f1)
        else:
            spread = abs(f1 - f2)
        if best is None or spread < best[3]:
            best = (e1, f1, a1, spread)
    return best, rows


def check(probe, n_dirs: int, seed: int, max_elements: int) -> dict:
    obj = Objective(probe)
    g_dict = probe.grad()
    obj.restore()
    g = obj.flat({n: np.asarray(g_dict[n]) for n in obj.names})
    x0 = obj.flat(obj.base)
    loss0 = float(probe.loss())
    out: dict = {"params": {n: list(obj.base[n].shape) for n in obj.names}, "loss": loss0}
    out["ad_finite"] = bool(np.all(np.isfinite(g)))
    out["loss_finite"] = bool(np.isfinite(loss0))
    # Per-array scale so a direction moves every parameter by a comparable relative amount.
    scale = np.concatenate(
        [
            np.full(s, max(float(np.sqrt(np.mean(obj.base[n].astype(np.float64) ** 2))), 1e-2))
            for n, s in zip(obj.names, obj.sizes)
        ]
    )
    rng = np.random.default_rng(seed)
    dirs = []
    for _ in range(n_dirs):
        v = rng.standard_normal(x0.size) * scale
        (eps, fd, ad, noise), rows = _fd_with_sweep(obj, x0, v, g)
        dirs.append(
            {
                "eps": eps,
                "ad": ad,
                "fd": fd,
                "noise": noise,
                "ratio": ad / fd if fd != 0 else float("inf"),
                "rel_err": abs(ad - fd) / max(abs(fd), 1e-300),
                "sweep": [[e, f, a] for e, f, a in rows],
            }
        )
    out["directions"] = dirs
    if x0.size <= max_elements:
        elems = []
        for i in range(x0.size):
            v = np.zeros_like(x0)
            v[i] = scale[i]
            (eps, fd, ad, noise), _ = _fd_with_sweep(obj, x0, v, g)
            elems.append({"i": i, "ad": ad, "fd": fd, "noise": noise})
        out["elements"] = elems
    out["signature"] = classify(out)
    return out


def classify(res: dict) -> str:
    if not res["ad_finite"] or not res["loss_finite"]:
        return "nan_inf"
    dirs = res["directions"]
    elems = res.get("elements", [])
    if all(d["ad"] == 0.0 for d in dirs) and any(abs(d["fd"]) > 10 * d["noise"] for d in dirs):
        return "zero"
    dir_ok = all(d["rel_err"] < REL_TOL for d in dirs)
    fd_max = max([abs(e["fd"]) for e in elems] + [1e-300])
    bad = [
        e
        for e in elems
        if abs(e["ad"] - e["fd"]) > REL_TOL * max(abs(e["fd"]), 1e-2 * fd_max) + 2 * e["noise"]
    ]
    if dir_ok and not bad:
        return "correct"
    ratios = [d["ratio"] for d in dirs] + [e["ad"] / e["fd"] for e in elems if abs(e["fd"]) > 1e-2 * fd_max]
    r = np.array(ratios)
    if np.all(np.isfinite(r)) and np.ptp(r) < 1e-2 * max(abs(np.mean(r)), 1e-12):
        # a common ratio within float32 accumulation error of 1 is not a factor bug
        return "exact_factor" if abs(np.mean(r) - 1.0) > 1e-2 else "correct_f32"
    if elems and bad and len(bad) <= len(elems) // 3:
        return "sparse_subset"
    return "subtly_wrong"


def _run_one(args) -> dict:
    ws = _stage(args.case, args.fixed)
    try:
        import warp as wp

        wp.config.log_level = wp.LOG_WARNING
        probe = _import_probe(args.case, ws)
        for item in args.set:
            name, value = item.split("=", 1)
            setattr(probe, name, ast.literal_eval(value))
        res = check(probe, args.dirs, args.seed, args.max_elements)
        res["set"] = args.set
        res["fixed"] = args.fixed
        return res
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def _summary(res: dict) -> str:
    lines = [f"  set={res['set']} fixed={res['fixed']} loss={res['loss']:.9g} signature={res['signature']}"]
    for d in res["directions"]:
        lines.append(
            f"    dir  AD.v={d['ad']: .6e}  FD.v={d['fd']: .6e}  ratio={d['ratio']:.6f}  "
            f"rel_err={d['rel_err']:.2e}  eps={d['eps']:g} noise={d['noise']:.1e}"
        )
    for e in res.get("elements", []):
        ratio = e["ad"] / e["fd"] if e["fd"] else float("nan")
        lines.append(f"    elem {e['i']:3d}  AD={e['ad']: .6e}  FD={e['fd']: .6e}  ratio={ratio:.6f}")
    return "\n".join(lines)


def _label_all() -> int:
    """Label every case as shipped and with its fix; compare with the meta's expected signature."""
    bad = 0
    for case, extra in CASES.items():
        meta = json.loads((SUITE / "graders" / case / "meta.json").read_text())
        runs = [("shipped", [])]
        if (SUITE / "graders" / case / "fixed").is_dir():
            runs.append(("fixed", ["--fixed"]))
        for name, flags in runs:
            cmd = [sys.executable, str(Path(__file__).resolve()), case, *extra, *flags]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            print(out.rstrip())
            label = [ln for ln in out.splitlines() if ln.startswith("label: ")][-1].split(": ", 1)[1]
            want = meta["expected_signature"] if name == "shipped" else "correct"
            ok = label == want
            bad += not ok
            print(f"==> {case} [{name}]: label {label}, expected {want}: {'OK' if ok else 'MISMATCH'}\n")
    print(f"{len(CASES)} cases, {bad} mismatches")
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("case", nargs="?")
    p.add_argument("--all", action="store_true", help="label every blind-b case (and its fix)")
    p.add_argument("--fixed", action="store_true", help="overlay graders/<case>/fixed/")
    p.add_argument("--set", action="append", default=[], help="ATTR=VALUE on the probe module")
    p.add_argument("--sweep", default=None, help="ATTR=v1,v2,... (each run in a fresh subprocess)")
    p.add_argument("--dirs", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-elements", type=int, default=48)
    p.add_argument("--json", default=None, help="write the raw result here")
    p.add_argument("--quiet-elements", action="store_true")
    p.add_argument("--suite", default=None, help="another suite folder of the same layout (evals/blind3)")
    args = p.parse_args(argv)
    if args.suite is not None:
        global SUITE  # noqa: PLW0603 -- every function reads SUITE; --suite repoints them all
        SUITE = Path(args.suite).resolve()
    os.environ.setdefault("WARP_CACHE_PATH", "/tmp/warpcache-blind-b")
    if args.all:
        return _label_all()
    if not args.case:
        p.error("give a CASE or --all")
    if args.sweep:
        name, values = args.sweep.split("=", 1)
        results = []
        for value in values.split(","):
            cmd = [
                sys.executable,
                str(Path(__file__).resolve()),
                args.case,
                "--dirs",
                str(args.dirs),
                "--seed",
                str(args.seed),
                "--max-elements",
                str(args.max_elements),
                "--set",
                f"{name}={value}",
                "--suite",
                str(SUITE),
            ]
            cmd += ["--fixed"] if args.fixed else []
            for s in args.set:
                cmd += ["--set", s]
            with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tf:
                out_path = tf.name
            subprocess.run([*cmd, "--json", out_path], check=True, stdout=subprocess.DEVNULL)
            results.append(json.loads(Path(out_path).read_text()))
            os.unlink(out_path)
        for r in results:
            print(_summary(r))
        sigs = [r["signature"] for r in results]
        mean_ratio = [float(np.mean([d["ratio"] for d in r["directions"]])) for r in results]
        label = sigs[-1]
        if sigs[0] in ("correct", "correct_f32") and sigs[-1] not in ("correct", "correct_f32"):
            label = "grows_across_iterations" if name.upper().startswith("ITER") else "truncation"
        print(f"sweep {name}: signatures {sigs}, mean AD/FD ratios {[round(m, 6) for m in mean_ratio]}")
        print(f"label: {label}")
        return 0
    res = _run_one(args)
    if args.json:
        Path(args.json).write_text(json.dumps(res))
    if args.quiet_elements:
        res.pop("elements", None)
    print(f"{args.case}:")
    print(_summary(res))
    print(f"label: {res['signature']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
