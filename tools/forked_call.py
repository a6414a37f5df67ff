"""Run one call in a forked child that is really killed at its deadline (the MCP server's tool calls).

A thread cannot be stopped, so a tool that overran in a thread kept running and could still write to the
ledger after its caller had given up. A forked child is killed for real: its process group gets SIGKILL,
and the user code it started dies with it. This is the fork machinery and its errors; the registry only
declares tools.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any, NoReturn

from .registry import ToolError


class ToolTimeout(ToolError):
    """A tool call ran past its time limit and was killed (with everything it started)."""


class ToolCancelled(ToolError):
    """The caller gave up on a tool call (the client cancelled it); it was killed."""


class ToolCrashed(ToolError):
    """The process running a tool call died without an answer (a signal, or it exited)."""


def run_bounded(fn: Callable[[], Any], timeout_s: float, cancel: threading.Event | None = None) -> Any:
    """Run `fn()` in a forked child process and return its (picklable) value, killing it at `timeout_s`.

    A thread cannot be stopped, so a tool that overran in a thread kept running and could still write
    to the ledger after its caller had given up. A forked child is killed for real: its process group
    gets SIGKILL, and the user code it started dies with it (the runner's launchers die with their
    parent). The child answers through a pipe; an exception in it comes back as `ToolCrashed` (a
    `ToolError` raised in it comes back as a `ToolError` with the same message).

    Setting `cancel` (from another thread) kills the child too, within 0.1 s.

    Raises:
        ToolTimeout: `fn` did not finish in `timeout_s`.
        ToolCancelled: `cancel` was set first.
        ToolCrashed: The child died without an answer, or `fn` raised something other than ToolError.
        ToolError: `fn` raised one.
    """
    r, w = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns that fork() in a threaded process may deadlock; the child only runs `fn`
        # and leaves with os._exit, never touching the parent's event loop or its threads' state.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        _answer_in_child(fn, r, w)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.setpgid(pid, pid)  # as the child does: whichever runs first, the group exists before any kill
    os.close(w)
    kind, value = _await_answer(r, pid, timeout_s, cancel)
    if kind == "tool_error":
        raise ToolError(value)
    if kind == "crash":
        raise ToolCrashed(value)
    return value


def _answer_in_child(fn: Callable[[], Any], r: int, w: int) -> NoReturn:
    """The forked child: run `fn`, write its length-prefixed pickled answer to `w`, and never return."""
    code = 0
    try:
        os.close(r)
        os.setpgid(0, 0)  # its own group: the parent kills everything it started that stayed in it
        try:
            answer: tuple[str, Any] = ("ok", fn())
        except ToolError as e:
            answer = ("tool_error", str(e))
        except BaseException as e:  # noqa: BLE001 -- everything must come back as an answer
            answer = ("crash", f"{type(e).__name__}: {e}")
        data = pickle.dumps(answer)
        view = memoryview(len(data).to_bytes(8, "big") + data)
        while view:
            view = view[os.write(w, view):]
    except BaseException:  # noqa: BLE001 -- never return into the parent's code
        code = 70
    finally:
        os._exit(code)


def _await_answer(r: int, pid: int, timeout_s: float, cancel: threading.Event | None) -> tuple[str, Any]:
    """Read the child's answer from `r` until it is whole, the deadline passes or `cancel` is set; always
    kill the child's process group and reap it before returning or raising."""
    deadline = time.monotonic() + timeout_s
    buf = bytearray()
    # The answer is length-prefixed: EOF cannot be awaited, because a child forked meanwhile by another
    # call holds a copy of this pipe's write end.
    need: int | None = None
    exited = False
    try:
        while need is None or len(buf) < need:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ToolTimeout(f"timed out after {timeout_s:.0f} s")
            if cancel is not None and cancel.is_set():
                raise ToolCancelled("cancelled by the caller")
            ready, _, _ = select.select([r], [], [], min(left, 0.1))
            if ready:
                chunk = os.read(r, 1 << 16)
                buf += chunk
                if need is None and len(buf) >= 8:
                    need = 8 + int.from_bytes(buf[:8], "big")
                if chunk:
                    continue
            if exited:
                raise ToolCrashed("the tool's process died without an answer")
            # Exited already? Read once more (the answer may be in the pipe) before calling it a crash.
            exited = os.waitpid(pid, os.WNOHANG)[0] != 0
    finally:
        os.close(r)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        if not exited:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    kind, value = pickle.loads(bytes(buf[8:]))  # our own forked child wrote it
    return kind, value
