"""Probe mode (runs in the subprocess): the FD check driven by a user- or agent-written probe file.

A probe imports the shipped program and defines `params()`, `loss()` and `grad()` (contract in
`references/verification.md`). All evaluations run in this one process: the harness perturbs the
`params()` arrays in place, calls `loss()`, and restores them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import warp as wp

from .. import fd
from . import hooks, warp_compat
from .protocol import ChildError, ProbeConfig, ProbeOptions, ProbeParam, ProbeReport

if TYPE_CHECKING:
    from .main import Session


class ProbeError(Exception):
    pass


def _np(a) -> np.ndarray:
    return hooks.original("numpy")(a) if isinstance(a, wp.array) else np.asarray(a)


def _probe_param(p: fd.Param, arr: wp.array) -> ProbeParam:
    """What the result says of one probe parameter: its AD gradient (in full only when small)."""
    dtype = arr.dtype.__name__ if hasattr(arr.dtype, "__name__") else arr.dtype
    return ProbeParam(name=p.name, shape=list(p.value.shape), dtype=str(dtype),
                      grad=p.grad.tolist() if p.grad.size <= 4096 else None, ad_norm=float(np.linalg.norm(p.grad)),
                      nonfinite=int(np.count_nonzero(~np.isfinite(p.grad))))


class ProbeListener(hooks.Listener):
    key = "probe"

    def __init__(self, session: Session) -> None:
        self.s = session
        if not isinstance(session.config, ProbeConfig):
            raise TypeError(f"ProbeListener runs in mode probe, not {session.config.mode!r}")
        self.spec: ProbeOptions = session.config.probe
        self.out = ProbeReport()

    def start(self) -> None:
        try:
            self._run()
        except ProbeError as e:
            self.s.finish("error", ChildError(kind="bad_probe", message=str(e)))
        except BaseException as e:  # noqa: BLE001 - the probe or the program raised: report it, with the user's frames
            from .main import user_error

            self.s.finish("error", user_error(e, None))
        self.s.finish("completed")

    def _import_probe(self, path: Path) -> ModuleType:
        """Import the probe file as `warpgrad_probe`, with the workspace and the script's folder importable."""
        sys.path.insert(0, str(self.s.workspace))
        sys.path.insert(0, str(path.parent))
        if self.s.script:
            sys.path.insert(0, str(self.s.script.parent))
        modspec = importlib.util.spec_from_file_location("warpgrad_probe", path)
        if modspec is None or modspec.loader is None:
            raise ProbeError(f"the probe {path.name} cannot be imported as a Python module")
        module = importlib.util.module_from_spec(modspec)
        sys.modules["warpgrad_probe"] = module
        modspec.loader.exec_module(module)
        for fn in ("params", "loss", "grad"):
            if not callable(getattr(module, fn, None)):
                raise ProbeError(f"the probe {path.name} must define {fn}(); see references/verification.md (probe files)")
        return module

    def _run(self) -> None:
        path = Path(self.spec.path).resolve()
        module = self._import_probe(path)
        params = module.params()
        if not isinstance(params, dict) or not params:
            raise ProbeError("params() must return a non-empty dict {name: wp.array}")
        for name, a in params.items():
            if not isinstance(a, wp.array):
                raise ProbeError(f"params()[{name!r}] is a {type(a).__name__}, not a wp.array: return the live arrays "
                                 "the program reads, so perturbing them perturbs the program")
        wanted = self.spec.params
        if wanted:
            missing = [n for n in wanted if n not in params]
            if missing:
                raise ProbeError(f"--param {', '.join(missing)}: not among the probe's params(): {sorted(params)}")
            params = {n: params[n] for n in wanted}
        base = self._loss(module)
        again = self._loss(module)
        grads_raw = module.grad()
        if not isinstance(grads_raw, dict):
            raise ProbeError("grad() must return a dict {name: array} with the same names as params()")
        after_grad = self._loss(module)
        plist = []
        for name, a in params.items():
            if name not in grads_raw:
                raise ProbeError(f"grad() has no entry for parameter {name!r}")
            g = _np(grads_raw[name]).astype(np.float64)
            v = _np(a).astype(np.float64).copy()
            if g.size != v.size:
                raise ProbeError(f"grad()[{name!r}] has {g.size} entries, params()[{name!r}] has {v.size}")
            plist.append(fd.Param(key=name, name=name, value=v, grad=g.reshape(v.shape)))
        loss_dtype_eps = 2.0**-24
        self.out.base_objective, self.out.rerun_objective, self.out.after_grad_objective = base, again, after_grad
        self.out.params = [_probe_param(p, params[p.name]) for p in plist]
        if base != again or base != after_grad:
            self.out.nondeterministic = True
            return

        def evaluate(batch):
            res = []
            for pert in batch:
                saved = {}
                applied = {}
                for key, delta in pert.items():
                    arr = params[key]
                    saved[key] = _np(arr).copy()
                    new = (saved[key].astype(np.float64) + delta.reshape(saved[key].shape)).astype(saved[key].dtype)
                    self._assign(arr, new)
                    applied[key] = _np(arr).astype(np.float64) - saved[key].astype(np.float64)
                try:
                    value = self._loss(module)
                    res.append(fd.Evaluation(objective=value, applied=applied))
                except Exception as e:  # noqa: BLE001 - one failed evaluation is data, not a crash
                    res.append(fd.Evaluation(objective=None, error=f"loss() raised {type(e).__name__}: {e}"))
                finally:
                    for key, old in saved.items():
                        self._assign(params[key], old)
            return res

        engine = fd.FDEngine(plist, evaluate, base, unit_roundoff=loss_dtype_eps,
                             n_directions=self.spec.directions, seed=self.spec.seed)
        report = engine.check(elements=self.spec.elements)
        self.out.report = report.model_dump()
        self.out.grads_nonfinite = sum(int(np.count_nonzero(~np.isfinite(p.grad))) for p in plist)
        self.out.all_zero = all(not np.any(p.grad) for p in plist)

    @staticmethod
    def _assign(arr, values: np.ndarray) -> None:
        with warp_compat.no_active_tape():
            if arr.device.is_cpu and arr.is_contiguous:
                view = hooks.original("numpy")(arr)
                view[...] = values.reshape(view.shape)
            else:
                arr.assign(values)

    @staticmethod
    def _loss(module) -> float:
        value = module.loss()
        if isinstance(value, wp.array):
            if value.size != 1:
                raise ProbeError(f"loss() returned an array of {value.size} elements; it must return one scalar "
                                 "(the objective the user reports)")
            value = hooks.original("numpy")(value).reshape(-1)[0]
        arr = np.asarray(value)
        if arr.size != 1:
            raise ProbeError(f"loss() returned {arr.size} values; it must return one scalar (the objective)")
        try:
            out = float(arr.reshape(-1)[0])
        except (TypeError, ValueError) as e:
            raise ProbeError(f"loss() returned {type(value).__name__}, not a number") from e
        if not np.isfinite(out):
            raise ProbeError(f"loss() is {out} at the unperturbed parameters: FD of a non-finite objective means "
                             "nothing; fix the forward first")
        return out

    def result(self) -> ProbeReport:
        return self.out
