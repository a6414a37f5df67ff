"""A small end-to-end finite-difference checker for eval-case probes.

Compares the probe's autodiff gradient with central differences of its loss along a few seeded
random directions (AD.v vs FD.v), choosing eps by a small sweep so the verdict is judged against
float32 noise rather than a guessed tolerance. The lead's ``warpgrad gradcheck --probe`` is the
real tool; this one only exists so the suite's tests can prove each case's bug and fix.

The probe runs in a child process (user code never runs in the caller's process)::

    python evals/graders/fdcheck.py --workspace evals/files/CASE --probe evals/graders/CASE/probe.py
    python evals/graders/fdcheck.py ... --overlay evals/graders/CASE/fixed   # check the reference fix

The last stdout line of the child is one JSON object (see ``check``).

Deliberately independent of warpgrad: it imports nothing from the package (not ``warpgrad.tools.fd``,
not the ``Signature`` enum) and spells the signature names as the plain strings of the wire format.
It grades the product, so it must not share the product's code: a bug in the FD engine, its step
choice or its classification would otherwise pass its own grading. A second, separately written
checker (``fdcheck_b.py``) guards against a shared mistake between this one and the engine.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

EPS_SWEEP = (3e-2, 1e-2, 3e-3, 1e-3)
RTOL = 2e-2


def check(
    workspace: Path,
    probe: Path,
    overlay: Path | None = None,
    *,
    directions: int = 3,
    seed: int = 0,
    timeout: float = 180.0,
) -> dict[str, Any]:
    """Run the FD check of ``probe`` against ``workspace`` in a subprocess.

    Args:
        workspace: Folder staged as the workspace root (put on ``sys.path``, made the cwd).
        probe: The probe file (params/loss/grad).
        overlay: Optional folder whose files replace/add to the workspace's (a reference fix).
        directions: Number of seeded random directions.
        seed: Seed of the directions.
        timeout: Wall-clock limit of the child in seconds.

    Returns:
        The child's JSON result: ``passed``, ``signature``, per-direction ``ad``/``fd``/``ratio``,
        ``eps``, ``noise_band``, ``max_rel_error``, ``grad_repeat_change``, ``loss``.

    Raises:
        RuntimeError: The child crashed or printed no result.
    """
    with tempfile.TemporaryDirectory(prefix="fdcheck-") as tmp:
        staged = Path(tmp) / "ws"
        shutil.copytree(workspace, staged, ignore=shutil.ignore_patterns("__pycache__"))
        if overlay is not None:
            shutil.copytree(overlay, staged, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            "--workspace",
            str(staged),
            "--probe",
            str(Path(probe).resolve()),
            "--directions",
            str(directions),
            "--seed",
            str(seed),
        ]
        proc = subprocess.run(
            cmd,
            check=False,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=timeout,
            cwd=staged,
            env=os.environ | {"PYTHONDONTWRITEBYTECODE": "1"},
        )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"fdcheck child failed (rc={proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def _as_numpy(value: Any) -> Any:
    import numpy as np

    return np.array(value.numpy() if hasattr(value, "numpy") else value, dtype=np.float64)


def _worker(workspace: Path, probe_path: Path, directions: int, seed: int) -> dict[str, Any]:
    import numpy as np

    sys.path.insert(0, str(workspace))
    os.chdir(workspace)
    spec = importlib.util.spec_from_file_location("warpgrad_eval_probe", probe_path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)

    params = probe.params()
    base = {k: a.numpy().copy() for k, a in params.items()}

    def restore() -> None:
        for k, a in params.items():
            a.assign(base[k])

    def loss_at(v: dict[str, Any], eps: float) -> float:
        for k, a in params.items():
            a.assign((base[k] + eps * v[k]).astype(base[k].dtype))
        try:
            return float(probe.loss())
        finally:
            restore()

    # Two grad() calls from the same parameters: a program that accumulates across calls grows.
    grads = {k: _as_numpy(g).reshape(base[k].shape) for k, g in probe.grad().items()}
    restore()
    grads2 = {k: _as_numpy(g).reshape(base[k].shape) for k, g in probe.grad().items()}
    restore()
    loss0, loss1 = float(probe.loss()), float(probe.loss())

    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(directions):
        # Scale each parameter's direction by its own magnitude so eps is a relative step.
        v = {}
        for k, b in base.items():
            scale = float(np.sqrt(np.mean(np.square(b, dtype=np.float64)))) or 1.0
            v[k] = rng.standard_normal(b.shape) * scale
        ad = float(sum(np.sum(grads[k] * v[k]) for k in base))
        fds = [(loss_at(v, e) - loss_at(v, -e)) / (2.0 * e) for e in EPS_SWEEP]
        diffs = [abs(fds[i] - fds[i + 1]) for i in range(len(fds) - 1)]
        finite = [i for i, d in enumerate(diffs) if np.isfinite(d)]
        best = min(finite, key=lambda i: diffs[i]) if finite else 0
        eps = EPS_SWEEP[best + 1]
        fd = fds[best + 1]
        band = diffs[best] + abs(loss0) * 1e-6 / eps
        err = abs(ad - fd)
        ok = bool(np.isfinite(ad) and err <= RTOL * max(abs(fd), abs(ad)) + 2.0 * band + 1e-12)
        rows.append(
            {
                "ad": ad,
                "fd": fd,
                "eps": eps,
                "fd_sweep": fds,
                "noise_band": band,
                "ratio": ad / fd if fd != 0.0 else None,
                "rel_error": err / max(abs(fd), 1e-30),
                "passed": ok,
            }
        )

    flat = np.concatenate([g.ravel() for g in grads.values()])
    flat2 = np.concatenate([g.ravel() for g in grads2.values()])
    repeat_change = float(np.linalg.norm(flat2 - flat) / max(np.linalg.norm(flat), 1e-30))
    passed = all(r["passed"] for r in rows)
    fd_nonzero = any(abs(r["fd"]) > 2.0 * r["noise_band"] for r in rows)
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    if not np.all(np.isfinite(flat)):
        signature = "nan_inf"
    elif not np.any(flat) and fd_nonzero:
        signature = "zero"
    elif np.isfinite(repeat_change) and repeat_change > 1e-3:
        signature = "grows_across_iterations"
    elif passed:
        signature = "correct"
    elif ratios and np.std(ratios) < 1e-2 * abs(np.mean(ratios)):
        signature = "exact_factor"
    else:
        signature = "subtly_wrong"
    return {
        "passed": passed and signature == "correct",
        "signature": signature,
        "factor": float(np.mean(ratios)) if signature == "exact_factor" else None,
        "directions": rows,
        "max_rel_error": max(r["rel_error"] for r in rows),
        "grad_repeat_change": repeat_change,
        "loss": loss0,
        "loss_repeatable": loss0 == loss1,
        "grad_nonfinite": int(np.sum(~np.isfinite(flat))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--probe", type=Path, required=True)
    parser.add_argument("--overlay", type=Path)
    parser.add_argument("--directions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = _worker(args.workspace, args.probe, args.directions, args.seed)
    else:
        result = check(args.workspace, args.probe, args.overlay, directions=args.directions, seed=args.seed)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
