"""The objective: what each `tape.backward` differentiates, read off its seeds.

A `loss=` is its own objective; `grads=` seeds and seeds written into `.grad` by hand differentiate the
implied objective `sum(seed * value)`. A seed that is an adjoint handed over from another backward pass
(hand-written checkpointing: read to the host and seeded back, or copied from one `.grad` into another) is a
boundary seed, not a loss: such passes are counted apart (`handoff`), and the objective is the loss the other
passes seed. `--objective NAME` names the objective in the user's frames instead.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

import numpy as np
import warp as wp

from ..capture_values import _np, _seed_kind, frame_value, name_of, scalar_of
from ..identity import ArraySet

if TYPE_CHECKING:
    from .iterations import _Iter
    from .listener import CaptureListener

# Seed kinds of an adjoint handed over from another backward pass: read to the host and seeded back, or kept on
# the device (copied from one .grad into another, or passed as grads= straight from another array's .grad).
_READ_BACK = "a gradient read after another backward"
_ON_DEVICE = "another array's .grad, handed over from another backward"


class Objective:
    """The seeds of each backward, the boundary seeds among them, and the value they differentiate."""

    def __init__(self, capture: CaptureListener) -> None:
        self.c = capture
        self.seeded_loss_read = False  # a host read of an array seeded into backward, after that backward
        self.last_boundary: list[np.ndarray] = []  # the boundary seeds of the backward being seeded now
        # .grad buffers the script filled from another array's .grad outside any tape (wp.copy / assign): an
        # adjoint handed over on the device between backward passes, whatever its values look like.
        self.handed = ArraySet()
        self.unseeded_backward = False
        # The last gradients the script read to the host: a later hand seed equal to one is a handed-over adjoint.
        self.grads_read: collections.deque[np.ndarray] = collections.deque(maxlen=64)

    def seeded_value(self, written: list, loss, grads) -> tuple[float, list[str]]:
        """The value a backward differentiates and a description of each seed. An instance attribute lookup on
        purpose: `torch_follow` wraps it where a torch loss seeded the tape."""
        reg = self.c.reg
        if loss is not None:
            reg.loss_ids.add(loss)
            reg.leaf_candidates.pop(id(loss), None)
            return scalar_of(loss), [f"tape.backward(loss={name_of(loss) or 'loss'})"]
        if grads:
            total, seeds = 0.0, []
            for arr, seed in grads.items():
                reg.loss_ids.add(arr)
                reg.leaf_candidates.pop(id(arr), None)
                sv = _np(seed).astype(np.float64)
                total += float(np.sum(_np(arr).astype(np.float64) * sv))
                holder = reg.grad_holder(seed) if isinstance(seed, wp.array) else None
                kind = f"boundary seed ({_ON_DEVICE})" if holder is not None and holder is not arr else \
                    self.seed_kind(sv)
                seeds.append(f"grads={{{name_of(arr) or 'array'}: {kind}}}")
                if kind.startswith("boundary seed"):
                    self.last_boundary.append(sv.copy())
            return total, seeds
        # Seeded by hand (`x.grad.fill_(1)`, `.grad.assign(...)`): the seeds are the nonzero grads of
        # arrays the tape writes (users often pass outputs in `inputs=`, so writes are read off the kernel
        # source); their dot product with the values is the objective being differentiated.
        total, seeds = 0.0, []
        for arr in written:
            if arr.grad is None or arr in reg.loss_ids:
                continue
            g = _np(arr.grad).astype(np.float64)
            if np.any(g != 0):
                reg.loss_ids.add(arr)
                reg.leaf_candidates.pop(id(arr), None)
                total += float(np.sum(g * _np(arr).astype(np.float64)))
                kind = f"boundary seed ({_ON_DEVICE})" if arr.grad in self.handed else self.seed_kind(g)
                seeds.append(f"hand-seeded {name_of(arr) or 'array'}.grad ({kind})")
                if kind.startswith("boundary seed"):
                    self.last_boundary.append(g.copy())
        if not seeds:
            self.c.notes.append("tape.backward() was called with no loss, no grads= and no nonzero seed gradient")
            self.unseeded_backward = True
        return total, seeds

    def seed_kind(self, seed: np.ndarray) -> str:
        """`_seed_kind`, except that a seed equal to a gradient the script read after an earlier backward is an
        adjoint handed over between backward passes (hand-written checkpointing), whatever its shape: a
        one-element or uniform adjoint looks like a loss seed but is not one."""
        if np.any(seed) and any(r.shape == seed.shape and np.array_equal(r, seed) for r in self.grads_read):
            return f"boundary seed ({_READ_BACK})"
        return _seed_kind(seed)

    @staticmethod
    def is_handoff(seeds: list[str]) -> bool:
        """Only an identity hand-off is certain: a seed merely equal to a gradient read earlier may be a loss seed
        of 1 after a read of a loss's .grad; those stay with the non-uniform seeds, judged across iterations."""
        return bool(seeds) and all(_ON_DEVICE in sd for sd in seeds)

    def named_objective(self) -> float | None:
        name = self.c.objective_name
        if name is None:
            return None
        try:
            return scalar_of(frame_value(name))
        except (KeyError, AttributeError, TypeError, ValueError) as e:
            self.c.notes.append(f"--objective {name}: not found in the script's frames ({e})")
            return None

    @staticmethod
    def _handed_over(table: dict[int, _Iter]) -> list[str]:
        """Non-uniform hand seeds that are adjoints handed from one backward to another (checkpointing), not a
        fixed weighting of the terms: a weighting repeats unchanged in every iteration, a handed-over adjoint
        changes with the parameters. With a single iteration to compare, it cannot be told apart: handed over."""
        recs = [r for r in table.values() if r.backward_calls]
        seqs = [r.boundary_values for r in recs]
        if not any(seqs):
            return []
        fixed = len(recs) >= 2 and all(len(q) == len(seqs[0]) for q in seqs) and all(
            a.shape == b.shape and np.array_equal(a, b) for q in seqs[1:] for a, b in zip(seqs[0], q))
        if fixed:
            return []
        return sorted({sd for r in recs for sd in r.seeds if "boundary seed" in sd})

    def boundary_seeds(self, table: dict[int, _Iter]) -> list[str]:
        """Every seed that hands an adjoint from one backward pass to another, in any recorded iteration of either
        accounting: the passes of one hand-written backward may fall into different accounted iterations (a
        boundary read to the host looks like a consumption), and one piece of it must never be judged alone."""
        acct = self.c.acct
        handed = {sd for t in (acct.iters, acct.bwd_iters) for r in t.values() for sd in r.handoff_seeds}
        return sorted(set(self._handed_over(table)) | handed)
