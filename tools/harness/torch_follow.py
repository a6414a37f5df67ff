"""Capture follows PyTorch when the user's script drives Warp from it (runs in the harness subprocess).

Three shapes users write, and what capture learns from torch in each:

* a Warp kernel inside a `torch.autograd.Function`: the tape's `backward(grads=...)` runs inside torch's
  `loss.backward()`, so its seed is the torch loss's adjoint, and the iteration's objective is that scalar
  torch loss (not the seeded dot product, which changes with the parameters and is no objective);
* a loss computed in torch from Warp output (`wp.to_torch(x)`), its gradient handed back by hand
  (`tape.backward(grads={x: wp.from_torch(x_t.grad)})`): every seed is the `.grad` of a leaf of the torch loss
  just differentiated, holding that leaf's values: again the objective is the torch loss;
* a `torch.optim` optimizer stepping a tensor Warp reads (`wp.from_torch`, shared storage or a copy): the step
  is the iteration's update, and the gradient it applies (`p.grad` at the step) is the one checked, whatever
  the script did to it between the Warp backward and the step.

Nothing here imports torch: the hooks go in at the first Warp event after the script imported `torch.optim`
(before that, no torch loss or optimizer can involve a Warp array). Torch's own global hooks
(`register_optimizer_step_pre_hook`/`post_hook`) see every optimizer; `torch.autograd.backward` (which
`Tensor.backward` calls) is wrapped to know the scalar loss being differentiated.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import numpy as np
import warp as wp

from . import hooks
from .capture_values import _np

if TYPE_CHECKING:
    from .capture import CaptureListener

_GRAPH_WALK_LIMIT = 20_000  # autograd nodes walked to find a loss's leaves (a bound, not a heuristic)


class _TorchLoss:
    """One scalar torch loss whose backward ran (or is running)."""

    def __init__(self, value: float, tensor: Any) -> None:
        self.value = value
        self.tensor = tensor
        self.counted = False  # its value went into an iteration's objective already (one loss, one objective)
        self.leaves: list[Any] | None = None


def _host(t: Any) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


def _leaves(loss: Any) -> list[Any]:
    """The leaf tensors a loss was differentiated into (its graph's AccumulateGrad nodes)."""
    out: list[Any] = []
    seen: set[int] = set()
    stack = [getattr(loss, "grad_fn", None)]
    while stack and len(seen) < _GRAPH_WALK_LIMIT:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        var = getattr(node, "variable", None)
        if var is not None:
            out.append(var)
        stack.extend(nxt for nxt, _ in getattr(node, "next_functions", ()))
    return out


def _scalars(arr: Any) -> int:
    """How many floats a Warp array holds (a vec3 array of N holds 3N, as its torch view does)."""
    return int(_np(arr).size)


def _shares_storage(arr: Any, t: Any) -> bool:
    """A Warp array is a view of the torch tensor's memory (`wp.from_torch`, `wp.to_torch`), whole."""
    return (t is not None and _scalars(arr) == int(t.numel()) and arr.device.is_cpu == (t.device.type == "cpu")
            and int(arr.ptr or 0) == int(t.data_ptr()))


def _same(arr: Any, t: Any) -> bool:
    """A Warp array and a torch tensor hold the same numbers: the same storage, or equal values."""
    if t is None or int(t.numel()) != _scalars(arr):
        return False
    if _shares_storage(arr, t):
        return True
    a = _np(arr).astype(np.float64).ravel()
    return bool(np.array_equal(a, _host(t).ravel()))


class TorchFollow(hooks.Listener):
    """Installs the torch hooks once the script has torch, and tells capture what they saw."""

    key = "torch_follow"

    def __init__(self, capture: CaptureListener) -> None:
        self.cap = capture
        self.installed = False
        self.active: _TorchLoss | None = None  # the scalar torch loss whose backward is running now
        self.done: _TorchLoss | None = None  # the last one whose backward finished
        self.stepped: list[Any] = []  # Warp parameters the running torch.optim step updates
        hooks.add_listener(self)
        # Capture asks `_seeded_value` what a backward differentiates; the torch loss answers first where it
        # seeded the tape. Wrapped here, not edited there, so capture carries a one-line hook only.
        capture.obj.seeded_value = self._seeded_value(capture.obj.seeded_value)  # type: ignore[method-assign]

    # ------------------------------------------------------------ installation (lazy)
    def _maybe_install(self) -> None:
        if not self.installed and "torch.optim.optimizer" in sys.modules:
            self.installed = True
            self._guarded(self._install)()

    def _install(self) -> None:
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        register_optimizer_step_pre_hook(self._guarded(self._pre_step))
        register_optimizer_step_post_hook(self._guarded(self._post_step))
        original = torch.autograd.backward

        def backward(tensors, grad_tensors=None, *args, **kwargs):
            loss = self._guarded(self._scalar_loss)(tensors, grad_tensors)
            if loss is None:
                return original(tensors, grad_tensors, *args, **kwargs)
            outer, self.active = self.active, loss
            try:  # the user's backward runs outside `in_hook`: the Warp tapes it drives are the user's
                return original(tensors, grad_tensors, *args, **kwargs)
            finally:
                self.active = outer
                self.done = loss

        torch.autograd.backward = backward

    # Any Warp event may be the first after `import torch`: each one checks (a dict lookup until installed).
    def before_launch(self, call: hooks.LaunchCall) -> None:
        self._maybe_install()

    def before_copy(self, call: hooks.CopyCall) -> None:
        self._maybe_install()

    def tape_enter(self, tape: Any) -> None:
        self._maybe_install()

    def before_backward(self, tape: Any, loss: Any, grads: Any) -> None:
        self._maybe_install()

    def grad_read(self, grad_array: Any, how: str) -> None:
        self._maybe_install()

    def _guarded(self, fn: Any) -> Any:
        """Torch calls these, not `hooks._emit`: the same policy (our failure is recorded, never raised at the
        user's line), and Warp calls made here are ours."""

        def call(*args: Any) -> Any:
            if self.broken or self.cap.broken:
                return None
            hooks.STATE.in_hook += 1
            try:
                return fn(*args)
            except Exception as e:  # noqa: BLE001 - see `hooks.notify`
                hooks._record_failure(self.cap, f"torch_follow.{getattr(fn, '__name__', 'hook')}", e)
                return None
            finally:
                hooks.STATE.in_hook -= 1

        return call

    # ------------------------------------------------------------ the objective: a scalar torch loss
    @staticmethod
    def _scalar_loss(tensors: Any, grad_tensors: Any) -> _TorchLoss | None:
        import torch

        t = tensors[0] if isinstance(tensors, (list, tuple)) and len(tensors) == 1 else tensors
        if not isinstance(t, torch.Tensor) or int(t.numel()) != 1 or not t.requires_grad:
            return None
        g = grad_tensors[0] if isinstance(grad_tensors, (list, tuple)) and len(grad_tensors) == 1 else grad_tensors
        if g is not None and not (isinstance(g, torch.Tensor) and float(g.detach().reshape(())) == 1.0):
            return None  # a weighted backward: the objective is not the tensor itself
        return _TorchLoss(float(t.detach().cpu().reshape(())), t)

    def _seeded_value(self, seeded_value: Any) -> Any:
        def seeded(written: list, loss: Any, grads: Any) -> tuple[float, list[str]]:
            total, seeds = seeded_value(written, loss, grads)
            if loss is not None or not seeds:
                return total, seeds  # a Warp loss array is its own objective; no seed, nothing to follow
            # `grads=` seeds, or seeds written into `.grad` by hand (only the running torch backward explains those).
            return self.objective(dict(grads or {}), self.cap.obj.last_boundary) or (total, seeds)

        return seeded

    def objective(self, grads: dict, boundary: list) -> tuple[float, list[str]] | None:
        """The iteration's objective when a tape's `grads=` seeds come from a torch loss (see the module doc);
        None when they do not. Clears `boundary`: such a seed is a loss's adjoint, not a handed-over one."""
        loss, how = self.active, "inside torch's loss.backward(), through a torch.autograd.Function"
        if loss is None and self.done is not None and self._leaf_grads(self.done, grads):
            loss, how = self.done, "the .grad of the torch loss's leaves, handed to the tape"
        if loss is None:
            return None
        boundary.clear()
        value = 0.0 if loss.counted else loss.value
        loss.counted = True
        return value, [f"torch loss.backward() ({how}): the objective is the torch loss"]

    def _leaf_grads(self, loss: _TorchLoss, grads: dict) -> bool:
        if not grads:
            return False
        if loss.leaves is None:
            loss.leaves = _leaves(loss.tensor)
        return all(isinstance(seed, wp.array) and any(_same(arr, leaf) and _same(seed, leaf.grad)
                                                       for leaf in loss.leaves)
                   for arr, seed in grads.items())

    # ------------------------------------------------------------ the update: a torch.optim step
    def _owner(self, p: Any) -> Any:
        """The Warp array the torch parameter `p` is: shared storage with any array the tape used, else a copy
        holding its values among the parameters this iteration consumed."""
        cap = self.cap
        rec = cap.acct.iters.get(cap.acct.it)
        owners = list(rec.owners.values()) if rec is not None else []
        for arr in [*owners, *cap.reg.leaf_candidates.values(), *cap.reg.grad_owner.values()]:
            if isinstance(arr, wp.array) and _shares_storage(arr, p):
                return arr
        if rec is None:
            return None
        for oid, arr in rec.owners.items():
            value = rec.params[oid]["value"]
            if value.size == int(p.numel()) and np.array_equal(value.ravel(), _host(p).ravel()):
                return arr
        return None

    def _pre_step(self, opt: Any, *_: Any) -> None:
        cap = self.cap
        self.stepped = []
        how = f"torch.optim.{type(opt).__name__}.step applies it"
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                owner = self._owner(p)
                if owner is None:
                    continue
                self.stepped.append(owner)
                rec = cap.acct.iters.get(cap.acct.it)
                oid = rec.aliases.get(owner, id(owner)) if rec is not None else id(owner)
                if rec is None or oid not in rec.params:
                    grad = owner.grad if owner.grad is not None and _same(owner.grad, p.grad) else None
                    if grad is not None:
                        cap.reg.consume(owner, grad, f"{how} (its .grad, shared with Warp's)")
                    continue
                self._applied(rec.params[oid], _host(p.grad), how)

    @staticmethod
    def _applied(param: dict, applied: np.ndarray, how: str) -> None:
        """The gradient checked is the one the step applies (the script may scale, clip or replace what it read)."""
        read = param["grads"]
        consumed = np.sum(read, axis=0) if param.get("zeroed_between") else read[-1]
        applied = applied.reshape(consumed.shape) if applied.size == consumed.size else applied
        if applied.shape == consumed.shape and np.array_equal(applied, consumed):
            param["how"] = f"{param['how']}; {how} unchanged"
            return
        param.update(grad=applied, grads=[applied], zeroed_between=False,
                     how=f"{how}: the parameter's .grad at the step, which differs from the Warp gradient read "
                         f"({param['how']})")

    def _post_step(self, opt: Any, *_: Any) -> None:
        cap = self.cap
        if self.stepped and cap.acct.phase == "consuming":
            # The torch step is the iteration's update: the next forward starts the next iteration.
            cap.acct.update_seen = True
            cap.fork.loose.clear()
            for owner in self.stepped:
                cap.acct.updated.add(owner)
        self.stepped = []
