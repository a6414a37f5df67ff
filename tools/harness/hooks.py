"""Hooks on Warp's public API, installed inside the harness subprocess before the user's script runs.

Listeners see every `wp.launch`, `wp.copy`, tape enter/exit/backward/zero/reset, `warp.optim`
optimizer step and host read of a `.grad` array. This module is the only place that patches Warp's API
(through `warp_compat`, which knows where each function lives); capture, FD evaluation, the tracker and
tape inspection are listeners.

An exception in a listener is caught by `notify`; one in this module's own code around a Warp call is
caught by `_ours`. Both are recorded as the harness's failure, never raised at the user's line.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, TypeVar

import warp as wp

from . import graph_replay, warp_compat

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])

_WARP_DIR = os.path.dirname(wp.__file__)
_HARNESS_DIR = os.path.dirname(__file__)
# Wrapper code objects pretend to live inside warp/_src so that Warp's own "first frame outside
# warp._src" call-site lookups (copy warnings) still name the user's line, not this file.
_FAKE_FILENAME = os.path.join(warp_compat.internal_source_dir(), "_warpgrad_hooks.py")


def user_frame(depth: int = 2) -> FrameType | None:
    """The innermost frame that belongs to neither Warp nor warpgrad (the user's call site)."""
    f: FrameType | None = sys._getframe(depth)
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
    options: dict[str, Any] = field(default_factory=dict)
    """`wp.launch`'s arguments after `outputs` (device, block_dim, ...), by name, as the call gave them."""

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

    broken: str | None = None
    """Why this listener stopped observing (its own exception or one of our hooks'); None while it works."""

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
    hook_failure: str | None = None
    """The first exception our own wrapper code raised (see `_hook_failed`); None while there is none."""
    recording: graph_replay.Recording | None = None
    """The events of the graph being captured now: held back until a replay runs them (`graph_replay`)."""
    graphs: dict[int, tuple[Any, graph_replay.Recording]] = field(default_factory=dict)
    """Each captured graph (kept alive, so its id stays its own) and the events recorded into it."""


STATE = _State()


def add_listener(listener: Listener) -> None:
    STATE.listeners.append(listener)


_GRAPH_EVENTS = ("graph_capture", "graph_launch", "script_end")


def _emit(name: str, *args) -> None:
    if STATE.in_hook:
        return  # Warp calls made by a listener itself (its own tapes, launches) are not the user's
    if STATE.recording is not None and name not in _GRAPH_EVENTS:
        STATE.recording.events.append((name, args))  # recorded, not run: delivered when a replay runs it
        return
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


def _fake_location(fn: _F) -> _F:
    fn.__code__ = fn.__code__.replace(co_filename=_FAKE_FILENAME)
    return fn


# ---------------------------------------------------------------------------------------------- our own failures
def _hook_failed(hook: str, e: Exception) -> None:
    """Our wrapper code around a Warp call raised (not a listener, not Warp): the harness's failure.

    Recorded as every listener's breakage, as `notify` records a listener's own (none of them saw this
    call, so all their evidence is incomplete), with our traceback; the user's call goes on unchanged.
    """
    message = f"hook {hook}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}"
    if STATE.hook_failure is None:
        STATE.hook_failure = message
    for listener in STATE.listeners:
        if not getattr(listener, "broken", None):
            listener.broken = message


def _ours(hook: str, fn: Callable[..., _T], *args: Any) -> _T | None:
    """Run the harness's own bookkeeping `fn` of hook `hook`; None when it raised (recorded, never re-raised)."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - an exception here is ours; it must never surface at the user's line
        _hook_failed(hook, e)
        return None


# ---------------------------------------------------------------------------------------------- launch
# `wp.launch`'s parameters after `outputs`, in order: a call may pass any of them by position.
_LAUNCH_OPTIONS = ("adj_inputs", "adj_outputs", "device", "stream", "adjoint", "record_tape", "record_cmd",
                   "max_blocks", "block_dim")


def _before_launch(kernel: Any, dim: Any, inputs: Any, outputs: Any, args: tuple,
                   kwargs: dict[str, Any]) -> tuple[LaunchCall, int]:
    """The call as listeners see it, announced to them, and the tape's record count before it."""
    options = {**dict(zip(_LAUNCH_OPTIONS, args)), **kwargs}
    adjoint = options.get("adjoint", False)
    record_tape = options.get("record_tape", True)
    tape = warp_compat.active_tape()
    call = LaunchCall(
        kernel, dim, list(inputs or []), list(outputs or []), bool(adjoint), bool(record_tape), tape,
        call_site(), bool(STATE.in_backward), bool(STATE.in_optimizer), options,
    )
    if not adjoint:
        _emit("before_launch", call)
    return call, (len(warp_compat.tape_records(tape)) if tape is not None else 0)


def _after_launch(call: LaunchCall, n_before: int) -> None:
    records = warp_compat.tape_records(call.tape) if call.tape is not None else []
    if len(records) > n_before and call.site["file"]:
        # Warp recorded this wrapper as the caller; put the user's line back.
        rec = warp_compat.kernel_record(records[-1])
        meta = rec.metadata if rec is not None else None
        if meta is not None:
            meta["caller"] = {"file": call.site["file"], "lineno": call.site["line"], "func": call.site["func"]}
    if not call.adjoint:
        _emit("after_launch", call)


@_fake_location
def _launch(kernel, dim, inputs=(), outputs=(), *args, **kwargs):
    orig_launch = STATE.originals["launch"]
    if STATE.in_hook:
        return orig_launch(kernel, dim, inputs, outputs, *args, **kwargs)
    before = _ours("launch", _before_launch, kernel, dim, inputs, outputs, args, kwargs)
    if before is None:
        return orig_launch(kernel, dim, inputs, outputs, *args, **kwargs)
    call, n_before = before
    prev, STATE.current = STATE.current, call
    try:
        result = orig_launch(kernel, dim, inputs, outputs, *args, **kwargs)
    finally:
        STATE.current = prev
    _ours("launch", _after_launch, call, n_before)
    return result


# ---------------------------------------------------------------------------------------------- copy
def _before_copy(dest: Any, src: Any) -> CopyCall:
    call = CopyCall(dest, src, warp_compat.active_tape(), call_site(), bool(STATE.in_backward))
    _emit("before_copy", call)
    return call


@_fake_location
def _copy(dest, src, *args, **kwargs):
    orig_copy = STATE.originals["copy"]
    # wp.copy copies the gradients too by calling itself on `.grad`: that inner copy is not the user's.
    if STATE.in_hook or isinstance(STATE.current, CopyCall):
        return orig_copy(dest, src, *args, **kwargs)
    call = _ours("copy", _before_copy, dest, src)
    if call is None:
        return orig_copy(dest, src, *args, **kwargs)
    prev, STATE.current = STATE.current, call
    try:
        result = orig_copy(dest, src, *args, **kwargs)
    finally:
        STATE.current = prev
    _emit("after_copy", call)
    return result


# ---------------------------------------------------------------------------------------------- tape
def _tape_enter(self):
    result = STATE.originals["enter"](self)
    _emit("tape_enter", self)
    return result


def _tape_exit(self, *exc):
    result = STATE.originals["exit"](self, *exc)
    _emit("tape_exit", self)
    return result


def _tape_backward(self, loss=None, grads=None):
    _emit("before_backward", self, loss, grads)
    STATE.in_backward += 1
    try:
        return STATE.originals["backward"](self, loss=loss, grads=grads)
    finally:
        STATE.in_backward -= 1
        _emit("after_backward", self, loss, grads)


def _tape_zero(self):
    _emit("tape_zero", self)
    return STATE.originals["zero"](self)


def _tape_reset(self):
    _emit("tape_reset", self)
    return STATE.originals["reset"](self)


# ---------------------------------------------------------------------------------------------- host reads
def _note_host_read(arr: Any, caller_file: str) -> None:
    if not caller_file.startswith((_WARP_DIR, _HARNESS_DIR)):
        _emit("grad_read", arr, "numpy")


def _array_numpy(self, *args, **kwargs):
    if not STATE.in_hook and not STATE.in_backward and not STATE.in_optimizer:
        _ours("numpy", _note_host_read, self, sys._getframe(1).f_code.co_filename)
    return STATE.originals["numpy"](self, *args, **kwargs)


def _wrap_to_torch(orig_to_torch: Callable[..., Any]) -> Callable[..., Any]:
    def to_torch(a, *args, **kwargs):
        if not STATE.in_hook:
            _emit("grad_read", a, "to_torch")
        return orig_to_torch(a, *args, **kwargs)

    return to_torch


# ---------------------------------------------------------------------------------------------- graph capture
# Graph capture records launches without running them and a replay runs them without any Python call: the
# events of a recording are held back and delivered around each replay, as an eager run would have produced
# them (`graph_replay`); a graph whose events cannot be delivered in order is announced as `graph_launch`.
def _capture_begin(*args, **kwargs):
    result = STATE.originals["capture_begin"](*args, **kwargs)
    _emit("graph_capture", True)
    STATE.recording = graph_replay.Recording()
    return result


def _capture_end(*args, **kwargs):
    rec, STATE.recording = STATE.recording, None
    graph = STATE.originals["capture_end"](*args, **kwargs)
    if rec is not None:
        STATE.graphs[id(graph)] = (graph, rec)
        if rec.decline():
            # Not followed at replay: the listeners see the events as recorded (while capturing), as they did
            # before replays were followed, and refuse with the reason.
            for name, event_args in rec.events:
                _emit(name, *event_args)
    _emit("graph_capture", False)
    return graph


def graph_decline(graph) -> str:
    """Why a replay of `graph` is not followed (for the listeners' `graph_launch`)."""
    entry = STATE.graphs.get(id(graph))
    if entry is None or entry[0] is not graph:
        return "wp.capture_launch replays a graph that was not recorded while the harness watched (loaded from a file?)"
    return entry[1].decline() or ""


def _capture_launch(graph, *args, **kwargs):
    entry = STATE.graphs.get(id(graph))
    if STATE.in_hook or entry is None or entry[0] is not graph or entry[1].decline():
        _emit("graph_launch", graph)
        return STATE.originals["capture_launch"](graph, *args, **kwargs)
    return graph_replay.replay(entry[1], lambda: STATE.originals["capture_launch"](graph, *args, **kwargs), _emit,
                               STATE.originals["numpy"])


# ---------------------------------------------------------------------------------------------- installing
_CONTEXT_HOOKS: dict[str, Callable[..., Any]] = {
    "launch": _launch, "copy": _copy,
    "capture_begin": _capture_begin, "capture_end": _capture_end, "capture_launch": _capture_launch,
}
_TAPE_HOOKS: dict[str, tuple[str, Callable[..., Any]]] = {
    "enter": ("__enter__", _tape_enter), "exit": ("__exit__", _tape_exit), "backward": ("backward", _tape_backward),
    "zero": ("zero", _tape_zero), "reset": ("reset", _tape_reset),
}


def install() -> None:
    """Patch Warp's API (once per process): launches, copies, tapes, host reads, graphs, optimizers."""
    if STATE.installed:
        return
    STATE.installed = True
    for name, hook in _CONTEXT_HOOKS.items():
        STATE.originals[name] = warp_compat.context_function(name)
        warp_compat.replace_context_function(name, hook)
    for key, (attr, hook) in _TAPE_HOOKS.items():
        STATE.originals[key] = getattr(wp.Tape, attr)
        setattr(wp.Tape, attr, hook)
    STATE.originals["numpy"] = wp.array.numpy
    wp.array.numpy = _array_numpy  # type: ignore[method-assign]
    for opt_cls in warp_compat.optimizer_classes():
        _patch_optimizer(opt_cls)
    warp_compat.replace_to_torch(_wrap_to_torch)


def _patch_optimizer(cls: Any) -> None:
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
    fields = warp_compat.struct_field_names(value)
    if fields is not None:
        for name in fields:
            sub = getattr(value, name, None)
            if sub is not None:
                yield from iter_arrays(sub, f"{path}.{name}" if path else name)
