"""A warm harness: boot Python, numpy and Warp once, then fork one process per run.

Started by `tools/worker.py` as `python -m warpgrad.tools.harness.worker BOOT_JSON` (a `WorkerBoot`), under
the same launcher and sandbox as a harness run. It imports numpy (one-thread BLAS pools: see `forking`) and
Warp, calls `wp.init()`, installs the hooks, optionally imports user modules, and then serves connections
on the inherited listening socket (the protocol is in `tools/worker_wire.py`).

Each connection gets a forked supervisor (a child subreaper, like `tools/reaper.py`) that forks the run's
process, which sets up what a fresh `python -m warpgrad.tools.harness.main CONFIG` would have (stdio,
working directory, environment, memory cap, sys.argv, sys.path[0]) and then calls `main.main`: the session
logic is the harness's own. The supervisor reports how the run ended and kills every process the run left
behind; a client that closes the connection first (its timeout) gets the same kill.

The worker exits after `idle_s` without a connection or a run in flight, or when a client retires it
(its files changed), once its runs are done. Everything it started dies with it (the launcher).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import select
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Iterable
from pathlib import Path

from .. import reaper
from ..worker_wire import MAX_MESSAGE, WorkerBoot, WorkerDone, WorkerHello, WorkerRequest, WorkerStarted
from . import forking, module_files
from .protocol import RunConfig

PACKAGE = Path(__file__).resolve().parents[2]
INSTALLED = frozenset({"site-packages", "dist-packages", ".venv", "venv"})
_retired = False


def boot(spec: WorkerBoot) -> dict[str, str]:
    """Import and initialize Warp as a harness run would, import the preload modules; the files imported."""
    forking.limit_threads()  # before numpy: the worker forks for every run
    from . import main

    main.boot(RunConfig(workspace=os.getcwd()), main.WarpLog())  # Warp's defaults: no tracker, no device
    _import_run_modules(main.MODES.values())
    forking.find_blas()
    module_files.prime()
    if spec.modules:
        added = [p for p in spec.sys_path if p not in sys.path]
        sys.path[:0] = added
        try:
            for name in spec.modules:
                try:
                    __import__(name)
                except Exception:  # noqa: BLE001 - a run that imports it reports the failure, as a fresh run does
                    traceback.print_exc()
        finally:
            for p in added:
                with contextlib.suppress(ValueError):
                    sys.path.remove(p)
    files = imported_files(Path(spec.workspace))
    forking.freeze_heap()
    return files


def _import_run_modules(modes: Iterable[str]) -> None:
    """What every run would import again: numpy.random (numpy loads it lazily) and the harness listeners."""
    import importlib

    for name in ["numpy.random", *(spec.partition(":")[0] for spec in modes), "warpgrad.tools.harness.tape_listener",
                 "warpgrad.tools.harness.tracker_listener", "warpgrad.tools.harness.localize"]:
        importlib.import_module(name)


def imported_files(workspace: Path) -> dict[str, str]:
    """sha256 of every source file of this process's modules under the workspace or warpgrad itself."""
    roots = (workspace.resolve(), PACKAGE)
    out: dict[str, str] = {}
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if not f or not f.endswith(".py"):
            continue
        p = module_files.resolved(f)
        root = next((r for r in roots if p.is_relative_to(r)), None)
        # A virtual environment inside the workspace (or the checkout) holds packages, not the user's code.
        installed = root is None or any(part in INSTALLED for part in p.relative_to(root).parts)
        if not installed and p.is_file():
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def serve(listen: socket.socket, idle_s: float, files: dict[str, str]) -> None:
    """Accept connections until idle for `idle_s` (or retired); fork a supervisor for each."""
    signal.signal(signal.SIGUSR1, _retire)
    running: set[int] = set()
    last = time.monotonic()
    while True:
        running = {pid for pid in running if not _reaped(pid)}
        if running:
            last = time.monotonic()
        if _retired and listen.fileno() >= 0:
            listen.close()  # new clients get ECONNREFUSED and take the cold path
        if _retired and not running:
            return
        left = idle_s - (time.monotonic() - last)
        if left <= 0 and not running:
            return
        ready = select.select([listen] if listen.fileno() >= 0 else [], [], [], max(0.0, min(left, 0.25)))[0]
        if not ready:
            continue
        try:
            conn, _ = listen.accept()
        except OSError:
            continue
        pid = forking.fork()
        if pid == 0:
            code = 70
            try:
                listen.close()
                signal.signal(signal.SIGUSR1, signal.SIG_DFL)
                code = supervise(conn, files)
            finally:
                os._exit(code)
        conn.close()
        running.add(pid)
        last = time.monotonic()


def _retire(signum: int, frame: object) -> None:
    global _retired  # noqa: PLW0603 - set from a signal handler, read by the accept loop
    _retired = True


def _reaped(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done != 0


def supervise(conn: socket.socket, files: dict[str, str]) -> int:
    """One connection: hello, the request, the run in a forked process, its status; nothing outlives it."""
    conn.sendall(WorkerHello(pid=os.getpid(), files=files).model_dump_json().encode())
    msg, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 2)
    if not msg:
        return 0
    req = WorkerRequest.model_validate_json(msg)
    if req.quit:
        os.kill(os.getppid(), signal.SIGUSR1)
        return 0
    if len(fds) != 2:
        return 2
    # Orphans of the run (daemons, double forks) come back to this process, which kills them at the end.
    reaper._prctl(reaper.PR_SET_CHILD_SUBREAPER, 1)
    pid = forking.fork()
    if pid == 0:
        conn.close()
        run_request(req, fds[0], fds[1])
    for fd in fds:
        os.close(fd)
    conn.sendall(WorkerStarted(pid=pid).model_dump_json().encode())
    status = _wait_or_hangup(pid, conn)
    reaper.kill_all()
    if status is None:  # the client hung up (its timeout): the run is killed, nobody to tell
        return 0
    done = (WorkerDone(signal=os.WTERMSIG(status)) if os.WIFSIGNALED(status)
            else WorkerDone(exit_code=os.WEXITSTATUS(status)))
    with contextlib.suppress(OSError):
        conn.sendall(done.model_dump_json().encode())
    return 0


def _wait_or_hangup(pid: int, conn: socket.socket) -> int | None:
    """The run's wait status, or None when the connection closed (or spoke) first."""
    pidfd = os.pidfd_open(pid)
    try:
        ready = select.select([pidfd, conn.fileno()], [], [])[0]
        if pidfd in ready:
            return os.waitpid(pid, 0)[1]
        return None
    finally:
        os.close(pidfd)


def run_request(req: WorkerRequest, out_fd: int, err_fd: int) -> None:
    """In the run's process: become a fresh harness process for `req`, run it, and never return."""
    code = 1
    try:
        os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        for fd in (null, out_fd, err_fd):
            os.close(fd)
        start_cwd = os.getcwd()
        os.chdir(req.cwd)
        os.environ.clear()
        os.environ.update(req.env)
        tempfile.tempdir = None  # TMPDIR is the run's own now
        if os.environ.get("WARP_CACHE_PATH"):
            # So is the kernel cache (`tools/worker.py`, `_own_kernel_cache`): what it compiles stays its own.
            from . import warp_compat

            warp_compat.init_kernel_cache(os.environ["WARP_CACHE_PATH"])
        if req.memory_mb:
            cap = req.memory_mb * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        # `python -m` puts the working directory first on sys.path.
        if sys.path and sys.path[0] in (start_cwd, ""):
            sys.path[0] = os.getcwd()
        from . import main

        sys.argv = [main.__file__, req.config]
        main.main([req.config])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - as an uncaught exception in a fresh process: traceback, exit 1
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def main(argv: list[str]) -> None:
    spec = WorkerBoot.model_validate_json(argv[0])
    listen = socket.socket(fileno=spec.listen_fd)
    files = boot(spec)
    serve(listen, spec.idle_s, files)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
