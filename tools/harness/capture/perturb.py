"""Perturbation and fork point: where FD adds its perturbation to a parameter, and where a hub forks.

Each use of an array has a *role* from program structure (kernel, occurrence, argument slot, struct field; a
copy's occurrence; an untaped use; a host read), never an address. Capture records, per parameter, the point
FD perturbs at: its first taped use, or an earlier use outside the tape that saw the same values (a host
write in between moves the point after the write, or the write would erase the perturbation). An "fd" run
adds the requested delta to the array's storage at that role; an FD hub (`serve`) forks its evaluations at
the first use of any role it serves, or at the end of the iteration or script when none is used.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .. import hooks, warp_compat
from ..capture_values import _np
from ..identity import ArrayMap
from ..protocol import CaptureOptions, FdOptions, ServeOptions

if TYPE_CHECKING:
    from .listener import CaptureListener


def _digest(arr) -> bytes | None:
    """A fingerprint of a CPU array's values: a later write through its numpy view shows as a new digest. None
    off the CPU, where `.numpy()` is a copy and every write goes through a hooked call (assign, copy, launch)."""
    if not (arr.device.is_cpu and arr.is_contiguous):
        return None
    return hashlib.blake2b(np.ascontiguousarray(_np(arr)).data, digest_size=16).digest()


class Perturbation:
    """Roles of uses, the perturbation points chosen from them, and the perturbations and forks at those points."""

    def __init__(self, capture: CaptureListener, spec: CaptureOptions | FdOptions) -> None:
        self.c = capture
        self.kernel_occ: dict[str, int] = {}
        self.copy_occ = 0
        # Uses outside the tape since the last update or backward: id -> (role, array, digest of its values then).
        self.loose: dict[int, tuple[str, object, bytes | None]] = {}
        self.untaped_occ: dict[str, int] = {}
        self.untaped_copy_occ = 0
        self.host_read_occ = 0
        # fd mode
        self.perturb: dict[str, np.ndarray] = {}
        self.applied: dict[str, np.ndarray] = {}
        self.deltas: ArrayMap[tuple[np.ndarray, np.ndarray]] = ArrayMap()  # perturbed array -> (before, delta)
        for p in spec.perturb if isinstance(spec, FdOptions) else []:
            self.perturb[p.role] = np.load(p.delta)
        # An FD hub: forks its evaluations at the first use of any of these roles (`serve`).
        self.serving: ServeOptions | None = spec.serve if isinstance(spec, FdOptions) else None
        self.launching: hooks.LaunchCall | None = None  # the taped launch whose arguments are being noted

    # ---------------------------------------------------------------- roles of uses
    def roles_of_launch(self, call: hooks.LaunchCall):
        key = call.kernel.key
        occ = self.kernel_occ.get(key, 0)
        self.kernel_occ[key] = occ + 1
        for idx, arg in enumerate(call.args):
            for path, arr in hooks.iter_arrays(arg):
                yield f"launch:{key}:{occ}:{idx}{'.' + path if path else ''}", arr

    def copy_role(self) -> str:
        role = f"copy:{self.copy_occ}:src"
        self.copy_occ += 1
        return role

    def untaped_occurrence(self, key: str) -> int:
        occ = self.untaped_occ.get(key, 0)
        self.untaped_occ[key] = occ + 1
        return occ

    def untaped_copy(self, arr) -> None:
        self.loose_use(f"untaped-copy:{self.untaped_copy_occ}:src", arr)
        self.untaped_copy_occ += 1

    def host_read(self, arr) -> None:
        self.loose_use(f"host-read:{self.host_read_occ}", arr)
        self.host_read_occ += 1

    def loose_use(self, role: str, arr) -> None:
        """A use outside the tape (an untaped launch or copy reading it, a host read) before the iteration's
        taped use: the perturbation must come before it too, or FD misses the paths AD misses as well."""
        if self.c.mode == "fd":
            self.perturb_at(role, arr)
        seen = self.loose.get(id(arr))
        if seen is None or seen[1] is not arr:
            # Only capture chooses perturbation points; FD runs perturb at the roles capture chose.
            self.loose[id(arr)] = (role, arr, _digest(arr) if self.c.mode == "capture" else None)

    def written(self, arr) -> None:
        """The host wrote `arr`: uses before the write saw the values it replaces, so the perturbation goes after it."""
        seen = self.loose.get(id(arr))
        if seen is not None and seen[1] is arr:
            del self.loose[id(arr)]

    def perturb_point(self, role: str, arr) -> str:
        """Where FD perturbs `arr`, first used on the tape at `role`: at its earlier use outside the tape, unless
        the host wrote it since (`p.assign(...)`, a write through its numpy view, an untaped kernel): the
        perturbation must follow the write that sets this iteration's value, or the write erases it."""
        loose = self.loose.get(id(arr))
        if loose is None or loose[1] is not arr:
            return role
        if loose[2] is not None and loose[2] != _digest(arr):
            return role
        return loose[0]

    # ---------------------------------------------------------------- perturbing and forking
    def perturb_alias(self, owner, arr) -> None:
        perturbed = self.deltas.get(owner)
        if perturbed is not None:
            self._add(arr, perturbed[1])

    def perturb_at(self, role: str, arr) -> None:
        """A use at `role`: where an FD run adds its perturbation, and where a hub forks its evaluations."""
        if self.serving is not None and role in self.serving.roles:
            self.serve(role)
        if role in self.perturb:
            self._apply(role, arr)

    def serve(self, at: str) -> None:
        """Fork the hub's evaluations here (`serve`); returns only in an evaluation, with its perturbation."""
        from .. import serve

        options, self.serving = self.serving, None
        if options is None:
            return
        if self.launching is not None:
            # Forking inside a launch whose module is not loaded yet (the first iteration): load it once here,
            # as the launch is about to, instead of once in every evaluation.
            with contextlib.suppress(Exception):  # the launch itself then raises what the load would
                warp_compat.load_launch_module(self.launching.kernel, self.launching.options)
        evaluation = serve.serve(self.c.s, options, at)
        self.perturb = {p.role: np.load(p.delta) for p in evaluation.perturb}
        self.c.outdir = Path(evaluation.outdir)

    def _apply(self, role: str, arr) -> None:
        self.applied[role] = self._add(arr, self.perturb.pop(role))

    def _add(self, arr, delta: np.ndarray) -> np.ndarray:
        """Add `delta` to `arr`'s storage; returns what was really added (after rounding to its dtype)."""
        with warp_compat.no_active_tape():
            hooks.STATE.in_hook += 1
            try:
                before = _np(arr).astype(np.float64).copy()
                if arr.device.is_cpu and arr.is_contiguous:
                    view = _np(arr)
                    view += delta.reshape(view.shape).astype(view.dtype)
                else:
                    arr.assign((before + delta.reshape(before.shape)).astype(_np(arr).dtype))
                after = _np(arr).astype(np.float64)
                self.deltas[arr] = (before, after - before)
                return after - before
            finally:
                hooks.STATE.in_hook -= 1
