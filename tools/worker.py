"""A warm harness worker per workspace: Python, numpy and Warp booted once, each harness run forked from it.

A fresh harness process pays Python, `import warp` and `wp.init()` (about a second of CPU) before the
user's script starts, and a `gradcheck` or a `diagnose` starts several. Inside `with worker_pool():`
`run_harness` sends each run to a worker (`tools/harness/worker.py`) that booted once, under the same
sandbox a fresh run gets (bubblewrap where usable, the subreaper launcher, the allow-listed environment,
the memory cap), and that forks one process per run. The result has the shape and content of a fresh
run's (the stdout and stderr tails, exit code or signal, timeout, memory limit).

- **Where runs may write.** bwrap's binds are fixed when the worker starts: the workspace, Warp's kernel
  cache, and a scratch folder of the pool. While a pool is active, Python's temp dir (`tempfile.tempdir`)
  is that scratch folder, so the harness configs and results and the tools' output folders land inside it.
  A run that would write anywhere else takes the fresh-process path.
- **Who starts it.** Only the process that opened the pool (the MCP server, the `diagnose` command),
  from one long-lived thread: the launcher and bwrap die with the thread that started them. Forked
  children (the MCP server runs each tool call in one) inherit the pool and use a running worker through
  its socket, which lives in a private 0700 folder outside the workspace; they never start one.
- **Invalidation.** The worker reports the sha256 of every source file it imported (warpgrad's harness,
  preloaded user modules); a run whose files changed since retires it and takes the fresh path, and the
  owner starts a new one. A run with a different environment or sandbox than the worker's also does.
- **Lifetime.** The worker exits after `idle_s` with nothing to do, and with its owner.
- **Correctness first.** Any failure before the run starts (no worker, a refused connection, a stale
  worker, CUDA in play: CUDA does not survive a fork) falls back to a fresh process. Where CUDA is
  usable, only runs that hide it (`device="cpu"`) can be forked; a pool whose workers keep dying stops
  starting them (`MAX_FAILED_WORKERS`).
- **Isolation between runs.** Runs forked from one worker share its sandbox: a run can write into the
  scratch folder another run of the same workspace uses at the same time (fresh processes each get a
  private temp dir). They run as the same user with the workspace writable either way.

Used by `warpgrad diagnose` (`worker_pool()` around its stages), by `warpgrad chat` (`worker_pool()` around
the session: its tools run in process) and by `warpgrad mcp` (`shared_pool()`, opened on the first tool
call and prewarmed in the server before each forked call).

User modules are not preloaded by default: a module imported at boot runs its top-level code before the
run's seeds are pinned and before the hooks have a session, which a fresh run would not do.
`WARPGRAD_WORKER=0` turns pools off.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from . import adopt, child_process
from .child_process import (
    DEFAULT_MEMORY_MB,
    TAIL_BYTES,
    ProcessResult,
    WarmRunner,
    _cuda_possible,
    _Tail,
    harness_env,
    signal_name,
)
from .kernel_cache import RUN_CACHE_DIR, harvest, seed_run, shared_cache
from .sandbox import (
    SandboxPolicy,
    bwrap_argv,
    detect_isolation,
    gpu_devices,
    network_requested,
    reaper_argv,
    redact,
    secret_values,
    warp_cache_dir,
)
from .worker_wire import MAX_MESSAGE, WorkerBoot, WorkerDone, WorkerHello, WorkerRequest, WorkerStarted

WORKER_ENV = "WARPGRAD_WORKER"
IDLE_ENV = "WARPGRAD_WORKER_IDLE_S"
DEFAULT_IDLE_S = 600.0
MAX_FAILED_WORKERS = 3
MODULE = "warpgrad.tools.harness.worker"
# Set per run, in the forked process; every other variable is read at boot and must match the worker's.
# WARP_CACHE_PATH: each forked run's own kernel cache (`_own_kernel_cache`).
PER_RUN_ENV = frozenset({"WARPGRAD_RESULT", "TMPDIR", "CUDA_VISIBLE_DEVICES", "WARP_CACHE_PATH"})


def _own_kernel_cache(env: dict[str, str], sandbox: SandboxPolicy) -> tuple[dict[str, str], SandboxPolicy]:
    """The run's environment and sandbox with a kernel cache of its own, in its temp dir.

    Runs forked from one worker share its sandbox, so none may write a cache another run loads (the cache
    of its code, `kernel_cache.py`, is bound only in a fresh run's sandbox). Each gets a private cache
    seeded with links to the modules of its code's cache (read-only inside), which links the user's compiled
    modules itself (`run_harness` seeds it just before): one source, not the user's cache and then the code's
    (`kernel_cache.seed_run`; once runs of the code or of its workspace have loaded modules, only those and a few
    more). It is thrown away with its temp dir. What the run compiled there is first
    copied into its code's cache by this process, outside the sandbox (`kernel_cache.harvest`, in `_run`): else
    a module neither cache holds (the tracker's builds, `warp.autograd`) would compile again in every forked run.
    """
    if shared_cache(os.environ) is not None:
        return env, sandbox  # trusted mode: every run writes the one shared cache (bound in the worker's sandbox)
    if _uses_cuda(env):
        return env, sandbox  # never forked (`WorkerPool._key`): a cache seeded for it would be thrown away unused
    shared = warp_cache_dir(env)
    tmp = env.get("TMPDIR")
    if not tmp:
        return env, sandbox
    own = Path(tmp) / RUN_CACHE_DIR
    own.mkdir(mode=0o700, exist_ok=True)
    seed_run(own, shared, Path(sandbox.workspace))
    writable = [d for d in sandbox.writable if Path(d).resolve() != shared.resolve()]
    return {**env, "WARP_CACHE_PATH": str(own)}, sandbox.model_copy(update={"writable": writable})


def _uses_cuda(env: dict[str, str]) -> bool:
    """The run may use CUDA (a device is possible and not hidden), so it cannot be forked from a worker."""
    return _cuda_possible() and env.get("CUDA_VISIBLE_DEVICES") != ""


class WorkerKey(BaseModel):
    """What a worker was booted with; a run with another key cannot be forked from it."""

    model_config = ConfigDict(frozen=True)

    python: str
    workspace: str
    network: bool
    devices: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    memory_mb: int


class _NotServed(Exception):
    """The worker cannot take this run (nothing of it ran): the caller uses a fresh process."""


class _Stale(_NotServed):
    """The worker imported files that changed since."""


class WorkerPool:
    """One warm worker for the runs of this process and its forked children (see the module doc)."""

    def __init__(self, *, idle_s: float | None = None, memory_mb: int = DEFAULT_MEMORY_MB,
                 preload: Sequence[str] = (), preload_path: Sequence[Path] = (), boot_timeout_s: float = 120.0) -> None:
        self.idle_s = float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_S)) if idle_s is None else idle_s
        self.memory_mb = memory_mb
        self.preload = list(preload)
        self.preload_path = [str(Path(p).resolve()) for p in preload_path]
        self.boot_timeout_s = boot_timeout_s
        self.owner = os.getpid()
        self.dir = Path(tempfile.mkdtemp(prefix="warpgrad-worker-"))  # 0700
        self.scratch = self.dir / "scratch"
        self.scratch.mkdir(mode=0o700)
        (self.dir / "sock").mkdir(mode=0o700)
        self.socket_path = self.dir / "sock" / "worker.sock"
        self.log_path = self.dir / "worker.log"
        self.key: WorkerKey | None = None
        self.isolation: str | None = None
        self.generation = 0
        self.spawned = 0
        self.served = 0  # runs this process sent through a worker (tests, benchmarks)
        self.failed = 0  # workers that died other than by their idle timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._old: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()
        # The launcher and bwrap die with the *thread* that started them (PR_SET_PDEATHSIG): start
        # workers from one thread that lives as long as the pool, never from a short-lived caller thread.
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="warpgrad-worker-spawn")
        self.previous: tuple[WarmRunner | None, str | None] = (None, None)  # restored by _deactivate

    # -- the runner `run_harness` calls ------------------------------------------------------------

    def run(self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float, memory_mb: int | None,
            sandbox: SandboxPolicy, cancel: threading.Event | None = None) -> ProcessResult | None:
        """Run one harness command (`... harness.main CONFIG`) in the worker; None: use a fresh process. Once
        `cancel` is set the run is killed (closing its connection kills it in the worker)."""
        try:
            return self._run(argv, cwd, env, timeout_s, memory_mb, sandbox, cancel)
        except Exception:  # noqa: BLE001 - a failure of the worker machinery must cost a fresh run, not the call
            return None

    def _run(self, argv: list[str], cwd: Path, env: dict[str, str], timeout_s: float, memory_mb: int | None,
             sandbox: SandboxPolicy, cancel: threading.Event | None = None) -> ProcessResult | None:
        code_cache = warp_cache_dir(env)
        env, sandbox = _own_kernel_cache(env, sandbox)
        key = self._key(env, sandbox)
        if key is None or memory_mb is None or memory_mb > key.memory_mb or not self._writable(sandbox, env):
            return None
        for _ in range(2):
            if not self._ready(key, env, sandbox):
                return None
            try:
                result = self._request(argv, argv[-1], cwd, env, timeout_s, memory_mb, cancel)
            except _Stale:
                if not self.is_owner():
                    return None
                continue  # the owner starts a fresh worker and sends the run there
            except _NotServed:
                return None
            self.served += 1
            own = warp_cache_dir(env)
            if own != code_cache and not code_cache.resolve().is_relative_to(Path(env.get("TMPDIR", own)).resolve()):
                # Its tracker builds and Warp's own modules: compiled once per code.
                harvest(own, code_cache, workspace=Path(sandbox.workspace))
            return result
        return None

    def prewarm(self, workspace: Path, device: str | None = None) -> bool:
        """Start the worker a default run in `workspace` would use, if it is not running (owner only)."""
        try:
            env = harness_env(device=device)
            policy = self._policy(Path(workspace), env)
            key = self._key(env, policy)
            return key is not None and self._ready(key, env, policy)
        except Exception:  # noqa: BLE001 - without a worker the runs take fresh processes; the call goes on
            return False

    def is_owner(self) -> bool:
        return os.getpid() == self.owner

    # -- which runs, which worker ------------------------------------------------------------------

    def _key(self, env: dict[str, str], sandbox: SandboxPolicy) -> WorkerKey | None:
        if _uses_cuda(env):
            return None  # CUDA does not survive a fork
        boot_env = tuple(sorted((k, v) for k, v in env.items() if k not in PER_RUN_ENV))
        return WorkerKey(python=sys.executable, workspace=str(Path(sandbox.workspace).resolve()),
                         network=sandbox.network, devices=tuple(str(d) for d in sandbox.devices), env=boot_env,
                         memory_mb=self.memory_mb)

    def _policy(self, workspace: Path, env: dict[str, str]) -> SandboxPolicy:
        # Never a kernel cache (each run's own lies in its temp dir inside the scratch folder), but the one shared
        # cache of trusted mode (`kernel_cache.shared_cache`).
        shared = shared_cache(os.environ)
        return SandboxPolicy(workspace=workspace, writable=[self.scratch, *([shared] if shared else [])],
                             devices=gpu_devices(),
                             network=network_requested(), shm_bytes=self.memory_mb * 2**20,
                             read_only=[warp_cache_dir(os.environ)])

    def _writable(self, sandbox: SandboxPolicy, env: dict[str, str]) -> bool:
        """Every folder the run may write lies inside one the worker's sandbox binds."""
        shared = shared_cache(os.environ)
        roots = [Path(sandbox.workspace).resolve(), self.scratch.resolve(), *([shared.resolve()] if shared else [])]
        return all(any(Path(d).resolve().is_relative_to(r) for r in roots) for d in sandbox.writable)

    def _ready(self, key: WorkerKey, env: dict[str, str], sandbox: SandboxPolicy) -> bool:
        """A worker with `key` is (being) started. A forked child only checks; the owner starts one."""
        if not self.is_owner():
            return self.key == key and not self._retired_marker()
        return self._spawner.submit(self._ensure, key, env, sandbox).result()

    def _ensure(self, key: WorkerKey, env: dict[str, str], sandbox: SandboxPolicy) -> bool:
        with self._lock:
            alive = self._proc is not None and self._proc.poll() is None
            if alive and self.key == key and not self._retired_marker():
                return True
            if self._proc is not None and self._proc.returncode not in (None, 0):
                self.failed += 1  # it died of something else than its idle timeout
            if self.failed >= MAX_FAILED_WORKERS:
                return False  # fresh processes from now on: a worker that keeps dying costs every run a boot
            self._stop_current()
            return self._spawn(key, env, sandbox)

    def _retired_marker(self) -> bool:
        marker = self.dir / "retired"
        return marker.is_file() and marker.read_text(encoding="ascii").strip() == str(self.generation)

    def _stop_current(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._old.append(self._proc)  # retired: it finishes its runs, then exits on its own
            self._proc = None
        for p in self._old:
            if p.poll() is not None:
                adopt.launcher_done(p.pid)
        self._old = [p for p in self._old if p.poll() is None]

    def _spawn(self, key: WorkerKey, env: dict[str, str], sandbox: SandboxPolicy) -> bool:
        info = detect_isolation()
        if info.isolation != "bwrap" and info.requested == "bwrap":
            return False
        listen = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        try:
            listen.bind(str(self.socket_path))
            listen.listen(64)
            os.set_inheritable(listen.fileno(), True)
            workspace = Path(sandbox.workspace).resolve()
            boot = WorkerBoot(listen_fd=listen.fileno(), idle_s=self.idle_s, workspace=str(workspace),
                              sys_path=self.preload_path, modules=self.preload)
            launch = reaper_argv([sys.executable, "-m", MODULE, boot.model_dump_json()], self.memory_mb)
            used = "subreaper"
            if info.isolation == "bwrap":
                policy = self._policy(workspace, env).model_copy(update={"network": sandbox.network,
                                                                         "devices": sandbox.devices})
                launch, used = bwrap_argv(policy, launch, cwd=workspace, bwrap=info.bwrap_path or "bwrap"), "bwrap"
            boot_env = {k: v for k, v in env.items() if k not in ("WARPGRAD_RESULT",)}
            boot_env["TMPDIR"] = str(self.scratch)
            boot_env["WARP_CACHE_PATH"] = str(self.scratch / "boot-kernels")  # the worker's own; runs re-point it
            warp_cache_dir(boot_env).mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "ab") as log, adopt.launching() as launchers:
                adopt.become_subreaper()
                self._proc = subprocess.Popen(
                    launch, cwd=workspace, env=boot_env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    pass_fds=(listen.fileno(),), start_new_session=True,
                )
                launchers.add(self._proc.pid)  # a launcher of ours, never an escapee (`adopt.sweep`)
        except OSError:
            return False
        finally:
            listen.close()  # the worker holds it now: when it exits, clients are refused at once
        self.key, self.isolation = key, used
        self.generation += 1
        self.spawned += 1
        return True

    # -- one run -------------------------------------------------------------------------------

    def _connect(self, timeout_s: float) -> tuple[socket.socket, WorkerHello]:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.settimeout(min(self.boot_timeout_s, timeout_s))  # a worker still booting answers when it is ready
            s.connect(str(self.socket_path))
            hello = WorkerHello.model_validate_json(s.recv(MAX_MESSAGE))
        except (OSError, ValidationError) as e:
            s.close()
            raise _NotServed(str(e)) from None
        if _changed(hello.files):
            self._retire(s)
            raise _Stale("the worker's files changed")
        return s, hello

    def _retire(self, s: socket.socket) -> None:
        (self.dir / "retired").write_text(str(self.generation), encoding="ascii")
        with contextlib.suppress(OSError):
            s.sendall(WorkerRequest(quit=True).model_dump_json().encode())
        s.close()

    def _request(self, argv: list[str], config: str, cwd: Path, env: dict[str, str], timeout_s: float,
                 memory_mb: int, cancel: threading.Event | None = None) -> ProcessResult:
        start = time.monotonic()
        s, _ = self._connect(timeout_s)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            req = WorkerRequest(config=config, cwd=str(Path(cwd).resolve()), env=env, memory_mb=memory_mb)
            socket.send_fds(s, [req.model_dump_json().encode()], [out_w, err_w])
        except OSError as e:
            for fd in (out_r, err_r):
                os.close(fd)
            s.close()
            raise _NotServed(str(e)) from None
        finally:
            os.close(out_w)
            os.close(err_w)
        out, err = _Tail(TAIL_BYTES), _Tail(TAIL_BYTES)
        streams = [os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb")]
        ended = threading.Event()
        readers = [threading.Thread(target=t.feed, args=(f, ended), daemon=True) for t, f in zip((out, err), streams)]
        for r in readers:
            r.start()
        try:
            try:
                WorkerStarted.model_validate_json(s.recv(MAX_MESSAGE))
            except (OSError, ValidationError) as e:
                raise _NotServed(f"the worker did not start the run: {e}") from None
            done, timed_out = _await_done(s, start + timeout_s, cancel)
        finally:
            s.close()  # before the run ended: the worker kills it and everything it started
            ended.set()
            for r in readers:
                r.join(timeout=5)
            for f in streams:
                f.close()
        res = self._result(argv, done, timed_out, start, out, err, memory_mb)
        if done is None and cancel is not None and cancel.is_set():
            res = res.model_copy(update={"timed_out": False, "cancelled": True, "signal": None})
        return res

    def _result(self, argv: list[str], done: WorkerDone | None, timed_out: bool, start: float, out: _Tail,
                err: _Tail, memory_mb: int) -> ProcessResult:
        rc, sig = (None, None) if timed_out else (done.exit_code, None if done.signal is None else signal_name(done.signal)) if done else (
            None, "SIGKILL")  # the worker died under the run
        secrets = secret_values()
        return ProcessResult(
            argv=argv, returncode=rc, signal=sig, timed_out=timed_out, wall_s=round(time.monotonic() - start, 3),
            stdout_tail=redact(out.text(), secrets), stderr_tail=redact(err.text(), secrets),
            stdout_bytes=out.total, stderr_bytes=err.total, memory_limit_mb=memory_mb, isolation=self.isolation,
        )

    # -- the end -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every worker of this pool and remove its folder (owner only; a no-op in forked children)."""
        if not self.is_owner():
            return
        with self._lock:
            procs = [p for p in [self._proc, *self._old] if p is not None]
            self._proc, self._old = None, []
        for p in procs:
            _kill(p)
        self._spawner.shutdown(wait=True)
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)

    def worker_pid(self) -> int | None:
        """The launcher's pid of the current worker (tests, benchmarks)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None


CANCEL_POLL_S = 0.05  # how soon a cancelled run is killed


def _await_done(s: socket.socket, deadline: float,
                cancel: threading.Event | None = None) -> tuple[WorkerDone | None, bool]:
    """The run's end, or (None, True) at the deadline or once `cancel` is set; (None, False) when the worker
    vanished."""
    while True:
        left = deadline - time.monotonic()
        if cancel is not None and cancel.is_set():
            return None, True
        s.settimeout(max(min(left, CANCEL_POLL_S) if cancel is not None else left, 0.001))
        try:
            data = s.recv(MAX_MESSAGE)
            break
        except TimeoutError:
            if time.monotonic() >= deadline:
                return None, True
        except OSError:
            return None, False
    try:
        return (WorkerDone.model_validate_json(data) if data else None), False
    except ValidationError:
        return None, False


def _changed(files: dict[str, str]) -> bool:
    for path, digest in files.items():
        try:
            if hashlib.sha256(Path(path).read_bytes()).hexdigest() != digest:
                return True
        except OSError:
            return True
    return False


def _kill(p: subprocess.Popen[bytes]) -> None:
    """SIGTERM makes the launcher kill the worker's whole tree; the group gets SIGKILL as a backstop."""
    with contextlib.suppress(ProcessLookupError):
        p.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.wait(timeout=5)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)
    p.wait()


_active: WorkerPool | None = None


def active_pool() -> WorkerPool | None:
    """The pool `run_harness` uses now (inherited by forked children), or None."""
    return _active


def enabled() -> bool:
    return os.environ.get(WORKER_ENV, "1").strip() not in ("0", "false", "no")


def shared_pool() -> WorkerPool | None:
    """The active pool, opened now for the rest of this process when none is (closed at exit).

    For a long-lived owner (the MCP server) that runs tool calls in forked children. None when
    `WARPGRAD_WORKER=0`.
    """
    if _active is not None or not enabled():
        return _active
    try:
        pool = _activate(WorkerPool())
    except OSError:  # no temp dir to make: fresh processes, as without a pool
        return None
    atexit.register(_deactivate, pool)
    return pool


def _activate(pool: WorkerPool) -> WorkerPool:
    global _active  # noqa: PLW0603 - one pool per process; forked tool calls find it here
    pool.previous = (child_process.set_warm_runner(pool.run), tempfile.tempdir)
    tempfile.tempdir = str(pool.scratch)
    _active = pool
    return pool


def _deactivate(pool: WorkerPool) -> None:
    global _active  # noqa: PLW0603 - see _activate
    if not pool.is_owner():
        return
    _active = None
    runner, tmp = pool.previous
    tempfile.tempdir = tmp
    child_process.set_warm_runner(runner)
    pool.close()


@contextlib.contextmanager
def worker_pool(*, idle_s: float | None = None, preload: Sequence[str] = (),
                preload_path: Sequence[Path] = ()) -> Iterator[WorkerPool | None]:
    """Route this process's harness runs (and its forked children's) through a warm worker.

    Yields None (fresh processes, as without it) when `WARPGRAD_WORKER=0` or a pool is already active.
    """
    if not enabled() or _active is not None:
        yield None
        return
    pool = _activate(WorkerPool(idle_s=idle_s, preload=preload, preload_path=preload_path))
    try:
        yield pool
    finally:
        _deactivate(pool)
