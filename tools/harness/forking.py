"""Fork a booted harness safely: no thread may be alive at the fork, and the forked leaf gets its threads back.

`fork()` in a multi-threaded process copies only the calling thread; a lock another thread held (in
OpenBLAS, in the allocator) stays locked forever in the child. numpy's OpenBLAS starts its thread pool
when numpy is imported, so a process that forks after booting Warp must import numpy with a pool of one
thread (`limit_threads`, before numpy is imported) and check before every fork that it is still alone
(`fork`). The forked process that runs user code puts the user's settings back (`restore_threads`), so a
run computes with the same BLAS thread count as a run that was never forked.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .protocol import BatchEntry

_POLL_S = 0.002

# OpenBLAS reads the first of these that is set; MKL and OpenMP runtimes read the last two.
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# How long an idle OpenBLAS thread spins before it sleeps: 2**N cycles, N in 4..30, default 28 (about 0.1 s),
# read once when numpy loads OpenBLAS. Every forked run starts its BLAS threads afresh (`start_pool`), and each
# new thread spins that long whether or not the run ever calls BLAS: with thirty FD evaluations that was a
# sixth of a gradcheck's CPU (perf: `blas_thread_server`). The shortest wait changes no result, only how soon
# an idle thread sleeps; the user's own value is restored in the environment the script sees.
TIMEOUT_VARS = ("OPENBLAS_THREAD_TIMEOUT", "GOTO_THREAD_TIMEOUT")
_SET_THREADS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
                "openblas_set_num_threads")
_GET_THREADS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads64_",
                "openblas_get_num_threads")

_saved: dict[str, str | None] = {}
"""The user's values of THREAD_VARS before `limit_threads` (empty: nothing to restore)."""


class NotForkable(RuntimeError):
    """A thread besides the caller is alive: forking now could deadlock the child."""


def limit_threads() -> None:
    """Ask for one-thread BLAS pools, remembering the user's settings. Call before numpy is imported.

    A no-op when already limited (a worker's forked child inherits the limit and the saved values).
    """
    if _saved:
        return
    for name in (*THREAD_VARS, *TIMEOUT_VARS):
        _saved[name] = os.environ.get(name)
    os.environ["OPENBLAS_THREAD_TIMEOUT"] = "4"
    os.environ.pop("GOTO_THREAD_TIMEOUT", None)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    os.environ.pop("GOTO_NUM_THREADS", None)


def thread_count() -> int:
    """Threads of this process (Linux: the entries of /proc/self/task)."""
    return len(os.listdir("/proc/self/task"))


def fork() -> int:
    """`os.fork()` after checking that this process has one thread; streams flushed first.

    Raises:
        NotForkable: Another thread is alive (e.g. numpy was imported before `limit_threads`).
    """
    n = thread_count()
    if n > 1:
        raise NotForkable(f"{n} threads are alive; a fork now could deadlock the child (was numpy imported "
                          "before limit_threads()?)")
    sys.stdout.flush()
    sys.stderr.flush()
    return os.fork()


def freeze_heap() -> None:
    """Move every object alive now out of the garbage collector's reach, in a process about to fork many times.

    A forked child shares the parent's memory until it writes a page, and a collection writes to the header of
    every object it scans: each child's first collections copied the whole booted heap (Warp, numpy, the
    user's arrays), page by page. Frozen objects are never scanned (nor freed, which a process that forks
    from this state and then exits does not need). The worker freezes once, after its boot, and collects what
    its runs leave as usual; an FD hub freezes at its fork point.
    """
    import gc

    gc.freeze()


def fork_each(time_limits: Sequence[float], jobs: int = 1) -> int | list[BatchEntry]:
    """Fork one process per time limit, `jobs` at a time, each killed (SIGKILL) at its own limit.

    Returns, in a forked process, its index: the caller sets it up as that item and must never come back into
    the loop. In the forking process, how each ended, in order, once all have.
    """
    entries: list[BatchEntry | None] = [None] * len(time_limits)
    running: dict[int, tuple[int, float]] = {}  # pid -> (index, start)
    following = 0
    while following < len(time_limits) or running:
        while following < len(time_limits) and len(running) < jobs:
            pid = fork()
            if pid == 0:
                return following
            running[pid] = (following, time.monotonic())
            following += 1
        for pid, (i, started) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                entries[i] = _ended(status, started)
            elif time.monotonic() - started > time_limits[i]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                entries[i] = BatchEntry(wall_s=round(time.monotonic() - started, 3), timed_out=True)
            else:
                continue
            del running[pid]
        if running:
            time.sleep(_POLL_S)
    return [e if e is not None else BatchEntry() for e in entries]


def _ended(status: int, started: float) -> BatchEntry:
    entry = BatchEntry(wall_s=round(time.monotonic() - started, 3))
    if os.WIFSIGNALED(status):
        entry.signal = signal.Signals(os.WTERMSIG(status)).name
    else:
        entry.returncode = os.WEXITSTATUS(status)
    return entry


def redirect_streams(stderr: str) -> None:
    """In a forked session: stdout discarded, stderr to its own file (the forking process reads it back)."""
    null = os.open(os.devnull, os.O_WRONLY)
    err = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(null, 1)
    os.dup2(err, 2)
    os.close(null)
    os.close(err)


_deferred_pool: int | None = None
"""The BLAS pool size `restore_threads(defer_pool=True)` left for `start_pool` (None: nothing pending)."""


def restore_threads(*, defer_pool: bool = False) -> None:
    """In a forked process that runs user code: the user's thread variables and BLAS pool size back.

    Starts the BLAS threads at once, so the process must not fork again afterwards (`fork` would refuse).
    With `defer_pool`, only the variables come back and the pool stays at one thread until `start_pool`: an
    FD hub runs the user's script and forks in the middle of it (`harness.serve`).
    """
    global _deferred_pool  # noqa: PLW0603 - one process, one pending pool size
    if not _saved:
        return
    for name, value in _saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _saved.clear()
    if defer_pool:
        _deferred_pool = _wanted_blas_threads()
        return
    _set_blas_threads(_wanted_blas_threads())


def start_pool() -> None:
    """The BLAS pool size `restore_threads(defer_pool=True)` held back (in the process that will not fork again)."""
    global _deferred_pool
    if _deferred_pool is not None:
        n, _deferred_pool = _deferred_pool, None
        _set_blas_threads(n)


def _wanted_blas_threads() -> int:
    """The pool size OpenBLAS would have chosen from the user's environment (its own order of variables)."""
    for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        raw = os.environ.get(name, "").strip()
        if raw:
            with contextlib.suppress(ValueError):
                if int(raw) > 0:
                    return int(raw)
    return len(os.sched_getaffinity(0)) or 1


@functools.cache
def _openblas() -> ctypes.CDLL | None:
    """numpy's OpenBLAS when it is loaded in this process (found in /proc/self/maps), else None.

    Cached: a booted process that calls it once after importing numpy spares each forked run the search.
    """
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            files = {ln.split()[-1] for ln in f if ln.strip()}
    except OSError:
        return None
    paths = [p for p in files if "openblas" in Path(p).name.lower() and ".so" in Path(p).name]
    for path in sorted(paths):
        with contextlib.suppress(OSError):
            return ctypes.CDLL(path)
    return None


def find_blas() -> None:
    """Look up numpy's OpenBLAS now (after numpy is imported), so forked processes inherit the answer."""
    _openblas()


def _set_blas_threads(n: int) -> None:
    lib = _openblas()
    if lib is None:
        return
    getter = next((getattr(lib, s) for s in _GET_THREADS if hasattr(lib, s)), None)
    setter = next((getattr(lib, s) for s in _SET_THREADS if hasattr(lib, s)), None)
    if setter is None or (getter is not None and getter() == n):
        return
    setter(n)
