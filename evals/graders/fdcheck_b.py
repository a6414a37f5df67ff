"""Hidden finite-difference check for the broken-simulation eval cases (cases B).

Two halves live in this one file so a grader needs nothing but a path to it:

* The parent side (`check_case`) stages a case's fixture into a fresh folder, optionally overlays the
  reference fix from ``graders/<id>/fixed/``, and runs this file as a subprocess there. It never
  imports Warp.
* The child side (``python fdcheck_b.py child PROBE``) runs inside the staged workspace: it imports the
  probe (which imports the fixture modules by name), takes the probe's gradient, and compares its
  projection on a seeded random direction ``v`` against a central difference of ``loss()`` along ``v``.
  It prints one JSON line.

A directional check is used because it costs two loss evaluations whatever the number of parameters,
and an exact factor, a zero, a NaN or a subtle error all survive the projection. ``--elements`` adds a
per-element central difference (2 loss calls per scalar) for cases whose signature lives on a subset.

Usage::

    python evals/graders/fdcheck_b.py case ballistic_sensor_fit [--fixed] [--elements] [--probe probe_seeded.py]

Deliberately independent of warpgrad and of ``fdcheck.py``: it imports nothing from the package (not
``warpgrad.tools.fd``, not the ``Signature`` enum; signature names are the wire-format strings) and
shares no code with the other grader. It grades the product, so reusing the product's FD engine or
classification would let a bug in them pass its own grading; being a single file also lets a grader
run it with nothing but a path.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

EVALS_DIR = Path(__file__).resolve().parents[1]
FILES_DIR = EVALS_DIR / "files"
GRADERS_DIR = EVALS_DIR / "graders"


# --------------------------------------------------------------------------------------------------
# parent side
# --------------------------------------------------------------------------------------------------
def stage_case(case_id: str, dest: Path, fixed: bool = False) -> Path:
    """Copy the fixture of ``case_id`` into ``dest`` (keeping subfolders) and overlay the fix if asked.

    Args:
        case_id: Folder name under ``evals/files``.
        dest: Empty folder that becomes the workspace.
        fixed: Overlay ``graders/<case_id>/fixed/`` on top of the fixture.

    Returns:
        The workspace path.
    """
    shutil.copytree(FILES_DIR / case_id, dest, dirs_exist_ok=True)
    fixed_dir = GRADERS_DIR / case_id / "fixed"
    if fixed:
        if not fixed_dir.is_dir():
            raise FileNotFoundError(
                f"{case_id} has no fixed/ folder; controls with correct gradients need none"
            )
        shutil.copytree(fixed_dir, dest, dirs_exist_ok=True)
    return dest


def check_case(
    case_id: str,
    fixed: bool = False,
    elements: bool = False,
    eps: float | None = None,
    timeout: float = 180.0,
    probe_name: str = "probe.py",
) -> dict[str, Any]:
    """Stage a case and run the probe's FD check in a subprocess.

    Args:
        case_id: Folder name under ``evals/files`` and ``evals/graders``.
        fixed: Check the reference fix instead of the shipped bug.
        elements: Also difference every parameter scalar (slow for large parameter counts).
        eps: Relative FD step; defaults to the case's ``fd_eps`` in meta.json, else 1e-3.
        timeout: Seconds before the child is killed.
        probe_name: Probe file in ``graders/<case_id>/`` (some cases ship a seed-pinned variant).

    Returns:
        The child's JSON result plus ``case``, ``fixed`` and ``wall_s``.
    """
    meta = json.loads((GRADERS_DIR / case_id / "meta.json").read_text(encoding="utf-8"))
    if eps is None:
        eps = float(meta.get("fd_eps", 1e-3))
    probe = GRADERS_DIR / case_id / probe_name
    with tempfile.TemporaryDirectory(prefix=f"wgb-{case_id}-") as tmp:
        ws = stage_case(case_id, Path(tmp) / "ws", fixed=fixed)
        cmd = [sys.executable, str(Path(__file__).resolve()), "child", str(probe), "--eps", repr(eps)]
        if elements:
            cmd.append("--elements")
        t0 = time.perf_counter()
        proc = subprocess.run(
            cmd,
            check=False,
            cwd=ws,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=timeout,
            env=_child_env(),
        )
        wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"case": case_id, "fixed": fixed, "ok": False, "wall_s": wall, "stderr": proc.stderr[-4000:]}
    result = json.loads(lines[-1])
    result.update(case=case_id, fixed=fixed, wall_s=wall)
    return result


def run_fixture(case_id: str, fixed: bool = False, timeout: float = 60.0) -> dict[str, Any]:
    """Run a case's entry script as the user would and return its exit code, output and wall time."""
    meta = json.loads((GRADERS_DIR / case_id / "meta.json").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix=f"wgb-run-{case_id}-") as tmp:
        ws = stage_case(case_id, Path(tmp) / "ws", fixed=fixed)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, meta["entry"]],
            check=False,
            cwd=ws,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=timeout,
            env=_child_env(),
        )
        wall = time.perf_counter() - t0
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "wall_s": wall}


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("WARP_CACHE_PATH", str(Path(tempfile.gettempdir()) / "warpgrad-evals-b-kernel-cache"))
    return env


# --------------------------------------------------------------------------------------------------
# child side (runs inside the staged workspace; imports Warp)
# --------------------------------------------------------------------------------------------------
def _child(probe_path: Path, eps: float, elements: bool, seed: int) -> dict[str, Any]:
    import numpy as np
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING
    sys.path.insert(0, str(Path.cwd()))
    spec = importlib.util.spec_from_file_location("wgb_probe", probe_path)
    assert spec is not None and spec.loader is not None
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)

    params: dict[str, Any] = probe.params()
    originals = {k: a.numpy().copy() for k, a in params.items()}
    grads = {k: _as_numpy(g).astype(np.float64).reshape(originals[k].shape) for k, g in probe.grad().items()}
    missing = sorted(set(params) - set(grads))
    for k in missing:
        grads[k] = np.zeros_like(originals[k], dtype=np.float64)

    def set_params(offsets: dict[str, Any]) -> None:
        for k, a in params.items():
            a.assign((originals[k] + offsets.get(k, 0.0)).astype(originals[k].dtype))

    set_params({})
    loss0 = float(probe.loss())
    loss0_again = float(probe.loss())

    rng = np.random.default_rng(seed)
    steps: dict[str, Any] = {}
    ad_dot_v = 0.0
    for k, p in originals.items():
        # Scale each parameter's step by its own magnitude, so one eps fits positions and stiffnesses.
        scale = max(float(np.sqrt(np.mean(np.square(p.astype(np.float64))))), 1e-2)
        v = rng.standard_normal(p.shape)
        steps[k] = eps * scale * v
        ad_dot_v += float(np.sum(grads[k] * steps[k]))
    set_params(steps)
    l_plus = float(probe.loss())
    set_params({k: -s for k, s in steps.items()})
    l_minus = float(probe.loss())
    set_params({})
    fd_dot_v = (l_plus - l_minus) / 2.0

    result: dict[str, Any] = {
        "ok": True,
        "loss": loss0,
        "loss_repeat_diff": abs(loss0 - loss0_again),
        "ad_dot_v": ad_dot_v,
        "fd_dot_v": fd_dot_v,
        "rel_err": _rel(ad_dot_v, fd_dot_v),
        "ratio": ad_dot_v / fd_dot_v if fd_dot_v != 0.0 else None,
        "ad_nonfinite": bool(any(not np.all(np.isfinite(g)) for g in grads.values())),
        "ad_all_zero": bool(all(np.all(g == 0.0) for g in grads.values())),
        "grad_norms": {k: float(np.linalg.norm(np.nan_to_num(g))) for k, g in grads.items()},
        "params_missing_grad": missing,
        "eps": eps,
    }
    if elements:
        result["elements"] = _elementwise(originals, grads, params, probe, eps)
    return result


def _elementwise(originals, grads, params, probe, eps) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {}
    for k, p in originals.items():
        flat = p.astype(np.float64).ravel()
        scale = max(float(np.sqrt(np.mean(np.square(flat)))), 1e-2)
        h = eps * scale
        fd = np.zeros(flat.size)
        for j in range(flat.size):
            for sign in (1.0, -1.0):
                q = flat.copy()
                q[j] += sign * h
                params[k].assign(q.reshape(p.shape).astype(p.dtype))
                fd[j] += sign * float(probe.loss())
            fd[j] /= 2.0 * h
        params[k].assign(p)
        ad = grads[k].ravel()
        err = np.abs(ad - fd)
        tol = 1e-2 * np.maximum(np.abs(fd), np.max(np.abs(fd)) * 1e-2 + 1e-12)
        bad = np.nonzero(err > tol)[0]
        out[k] = {
            "n": int(flat.size),
            "mismatch_idx": [int(i) for i in bad],
            "max_abs_err": float(np.max(err)),
            "ad": [float(x) for x in ad[:64]],
            "fd": [float(x) for x in fd[:64]],
        }
    return out


def _as_numpy(g: Any):
    import numpy as np

    return g.numpy() if hasattr(g, "numpy") else np.asarray(g)


def _rel(a: float, b: float) -> float:
    if not (math.isfinite(a) and math.isfinite(b)):
        return float("inf")
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("case", help="stage a case and check it")
    c.add_argument("case_id")
    c.add_argument("--fixed", action="store_true")
    c.add_argument("--elements", action="store_true")
    c.add_argument("--eps", type=float, default=None)
    c.add_argument("--probe", default="probe.py", help="probe file name inside graders/<case_id>/")
    ch = sub.add_parser("child", help="(internal) run inside a staged workspace")
    ch.add_argument("probe", type=Path)
    ch.add_argument("--eps", type=float, default=1e-3)
    ch.add_argument("--elements", action="store_true")
    ch.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.cmd == "child":
        print(json.dumps(_child(args.probe, args.eps, args.elements, args.seed)))
        return 0
    print(
        json.dumps(
            check_case(
                args.case_id, fixed=args.fixed, elements=args.elements, eps=args.eps, probe_name=args.probe
            )
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
