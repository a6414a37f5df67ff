"""Hooks on Warp's public API, installed inside the harness subprocess before the user's script runs.

Listeners see every `wp.launch`, `wp.copy`, tape enter/exit/backward/zero/reset, `warp.optim`
optimizer step and host read of a `.grad` array. This module is the only place that patches Warp;
capture, FD evaluation, the tracker and tape inspection are listeners.
"""

from __future__ import annotations

import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any

import warp as wp

_WARP_DIR = os.path.dirname(wp.__file__)
_HARNESS_DIR = os.path.dirname(__file__)
# Wrapper code objects pretend to live inside warp/_src so that Warp's own "first frame outside
# warp._src" call-site lookups (copy warnings) still name the user's line, not this file.
_FAKE_FILENAME = os.path.join(_WARP_DIR, "_src", "_warpgrad_hooks.py")


def user_frame(depth: int = 2):
    """The innermost frame that belongs to neither Warp nor warpgrad (the user's call site)."""
    f = sys._getframe(depth)
    while f is not None:
        fn = f.f_code.co_filename
        if not (fn.startswith((_WARP_DIR, _HARNESS_DIR, "<frozen")) or fn == _FAKE_FILENAME):
            return f
        f = f.f_back
    return None


def call_site(depth: int = 2) -> dict[str, Any]:
    f = user_frame(depth + 1)
    if f is None:
        return {"file": None, "line": None, "func": None}
    return {"file": f.f_code.co_filename, "line": f.f_lineno, "func": f.f_code.co_name}


@dataclass
class LaunchCall:
    kernel: Any
    dim: Any
    inputs: list
    outputs: list
    adjoint: bool
    record_tape: bool
    tape: Any
    site: dict[str, Any]
    in_backward: bool
    in_optimizer: bool

    @property
    def taped(self) -> bool:
        """Recorded on the active tape (a forward launch the backward pass will replay)."""
        return self.tape is not None and self.record_tape and not self.adjoint

    @property
    def args(self) -> list:
        return list(self.inputs) + list(self.outputs)


@dataclass
class CopyCall:
    dest: Any
    src: Any
    tape: Any
    site: dict[str, Any]
    in_backward: bool


class Listener:
    """Override what you need; every hook is called with Warp's own objects."""

    def before_launch(self, call: LaunchCall) -> None: ...
    def after_launch(self, call: LaunchCall) -> None: ...
    def before_copy(self, call: CopyCall) -> None: ...
    def after_copy(self, call: CopyCall) -> None: ...
    def tape_enter(self, tape) -> None: ...
    def tape_exit(self, tape) -> None: ...
    def before_backward(self, tape, loss, grads) -> None: ...
    def after_backward(self, tape, loss, grads) -> None: ...
    def tape_zero(self, tape) -> None: ...
    def tape_reset(self, tape) -> None: ...
    def optimizer_step(self, opt, grads) -> None: ...
    def grad_read(self, grad_array, how: str) -> None: ...
    def script_end(self) -> None: ...
    def graph_capture(self, active: bool) -> None: ...
    def graph_launch(self, graph) -> None: ...


@dataclass
class _State:
    listeners: list[Listener] = field(default_factory=list)
    in_backward: int = 0
    in_optimizer: int = 0
    in_hook: int = 0
    current: LaunchCall | CopyCall | None = None
    """The launch or copy executing now: Warp's warnings during it belong to its call site."""
    installed: bool = False
    originals: dict[str, Any] = field(default_factory=dict)


STATE = _State()


def add_listener(listener: Listener) -> None:
    STATE.listeners.append(listener)


def _emit(name: str, *args) -> None:
    if STATE.in_hook:
        return  # Warp calls made by a listener itself (its own tapes, launches) are not the user's
    STATE.in_hook += 1
    try:
        notify(STATE.listeners, name, *args)
    finally:
        STATE.in_hook -= 1


def notify(listeners, name: str, *args) -> None:
    """Call `name` on every listener that still works; the one place a listener's exception is caught.

    Recorded as the harness's own error (with our traceback); the listener stops observing, the user's
    script goes on, and the result says the evidence is incomplete and why. Our failure must never surface
    at the user's line, nor end the run without its result document.
    """
    for listener in listeners:
        if getattr(listener, "broken", None):
            continue
        try:
            getattr(listener, name)(*args)
        except Exception as e:  # noqa: BLE001 - see the docstring
            _record_failure(listener, name, e)


def _record_failure(listener, name: str, e: Exception) -> None:
    listener.broken = f"{name}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}"


def safe(method):
    """`notify`'s policy for a listener's own methods that the harness calls directly (not through a hook).

    A failure is recorded as the listener's breakage, exactly as `notify` records it, and the call returns None.
    """
    import functools

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if getattr(self, "broken", None):
            return None
        try:
            return method(self, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - see `notify`
            _record_failure(self, method.__name__, e)
            return None

    return wrapper


def original(name: str):
    """The unpatched Warp callable (use it for the harness's own array I/O)."""
    return STATE.originals[name]


def _fake_location(fn):
    fn.__code__ = fn.__code__.replace(co_filename=_FAKE_FILENAME)
    return fn


def install() -> None:
    if STATE.installed:
        return
    STATE.installed = True
    from warp._src import context as ctx

    orig_launch = wp.launch
    orig_copy = wp.copy
    Tape = wp.Tape
    orig = STATE.originals
    orig.update(
        launch=orig_launch, copy=orig_copy, enter=Tape.__enter__, exit=Tape.__exit__, backward=Tape.backward,
        zero=Tape.zero, reset=Tape.reset, numpy=wp.array.numpy,
    )

    @_fake_location
    def launch(kernel, dim, inputs=(), outputs=(), *args, **kwargs):
        if STATE.in_hook:
            return orig_launch(kernel, dim, inputs, outputs, *args, **kwargs)
        adjoint = kwargs.get("adjoint", False)
        record_tape = kwargs.get("record_tape", True)
        tape = ctx.runtime.tape
        call = LaunchCall(
            kernel, dim, list(inputs or []), list(outputs or []), bool(adjoint), bool(record_tape), tape,
            call_site(), bool(STATE.in_backward), bool(STATE.in_optimizer),
        )
        if not adjoint:
            _emit("before_launch", call)
        n_before = len(tape.launches) if tape is not None else 0
        prev, STATE.current = STATE.current, call
        try:
            result = orig_launch(kernel, dim, inputs, outputs, *args, **kwargs)
        finally:
            STATE.current = prev
        if tape is not None and len(tape.launches) > n_before and call.site["file"]:
            # Warp recorded this wrapper as the caller; put the user's line back.
            meta = tape.launches[-1][7] if isinstance(tape.launches[-1], list) else None
            if isinstance(meta, dict):
                meta["caller"] = {"file": call.site["file"], "lineno": call.site["line"], "func": call.site["func"]}
        if not adjoint:
            _emit("after_launch", call)
        return result

    @_fake_location
    def copy(dest, src, *args, **kwargs):
        # wp.copy copies the gradients too by calling itself on `.grad`: that inner copy is not the user's.
        if STATE.in_hook or isinstance(STATE.current, CopyCall):
            return orig_copy(dest, src, *args, **kwargs)
        call = CopyCall(dest, src, ctx.runtime.tape, call_site(), bool(STATE.in_backward))
        _emit("before_copy", call)
        prev, STATE.current = STATE.current, call
        try:
            result = orig_copy(dest, src, *args, **kwargs)
        finally:
            STATE.current = prev
        _emit("after_copy", call)
        return result

    def enter(self):
        result = orig["enter"](self)
        _emit("tape_enter", self)
        return result

    def exit_(self, *exc):
        result = orig["exit"](self, *exc)
        _emit("tape_exit", self)
        return result

    def backward(self, loss=None, grads=None):
        _emit("before_backward", self, loss, grads)
        STATE.in_backward += 1
        try:
            return orig["backward"](self, loss=loss, grads=grads)
        finally:
            STATE.in_backward -= 1
            _emit("after_backward", self, loss, grads)

    def zero(self):
        _emit("tape_zero", self)
        return orig["zero"](self)

    def reset(self):
        _emit("tape_reset", self)
        return orig["reset"](self)

    def numpy(self, *args, **kwargs):
        if not STATE.in_hook and not STATE.in_backward and not STATE.in_optimizer:
            f = sys._getframe(1)
            if not (f.f_code.co_filename.startswith(_WARP_DIR) or f.f_code.co_filename.startswith(_HARNESS_DIR)):
                _emit("grad_read", self, "numpy")
        return orig["numpy"](self, *args, **kwargs)

    # Graph capture records launches without running them and a replay runs them without any Python call:
    # listeners must know, since what they saw during recording is not what executes.
    orig_begin, orig_end, orig_glaunch = ctx.capture_begin, ctx.capture_end, ctx.capture_launch

    def capture_begin(*args, **kwargs):
        result = orig_begin(*args, **kwargs)
        _emit("graph_capture", True)
        return result

    def capture_end(*args, **kwargs):
        _emit("graph_capture", False)
        return orig_end(*args, **kwargs)

    def capture_launch(graph, *args, **kwargs):
        _emit("graph_launch", graph)
        return orig_glaunch(graph, *args, **kwargs)

    wp.capture_begin = ctx.capture_begin = capture_begin
    wp.capture_end = ctx.capture_end = capture_end
    wp.capture_launch = ctx.capture_launch = capture_launch
    wp.launch = launch
    ctx.launch = launch
    wp.copy = copy
    ctx.copy = copy
    Tape.__enter__ = enter
    Tape.__exit__ = exit_
    Tape.backward = backward
    Tape.zero = zero
    Tape.reset = reset
    wp.array.numpy = numpy

    for opt_cls in _optimizer_classes():
        _patch_optimizer(opt_cls)

    try:
        import warp._src.torch as wtorch

        orig_to_torch = wtorch.to_torch

        def to_torch(a, *args, **kwargs):
            if not STATE.in_hook:
                _emit("grad_read", a, "to_torch")
            return orig_to_torch(a, *args, **kwargs)

        wtorch.to_torch = to_torch
        wp.to_torch = to_torch
    except ImportError:  # pragma: no cover - torch interop module missing in this Warp build
        pass


def _optimizer_classes() -> list[type]:
    # Import the private modules, not `warp.optim`: importing that would set `wp.optim` and make a
    # script that forgot `import warp.optim` work under warpgrad and fail without it.
    import importlib

    classes = []
    for mod, name in (("warp._src.optim.sgd", "SGD"), ("warp._src.optim.adam", "Adam")):
        try:
            classes.append(getattr(importlib.import_module(mod), name))
        except (ImportError, AttributeError):
            continue
    return classes


def _patch_optimizer(cls: type) -> None:
    orig_step = cls.step

    def step(self, grad, *args, **kwargs):
        _emit("optimizer_step", self, grad)
        STATE.in_optimizer += 1
        try:
            return orig_step(self, grad, *args, **kwargs)
        finally:
            STATE.in_optimizer -= 1

    cls.step = step


def iter_arrays(value, path: str = ""):
    """Yield (path, wp.array) for an argument: the array itself, or arrays held in (nested) struct fields."""
    if isinstance(value, wp.array):
        yield path, value
        return
    struct = getattr(value, "_cls", None)
    vars_ = getattr(struct, "vars", None)
    if isinstance(vars_, dict):
        for name in vars_:
            sub = getattr(value, name, None)
            if sub is not None:
                yield from iter_arrays(sub, f"{path}.{name}" if path else name)
