"""Run user code in a subprocess: whole-tree kill at the timeout, memory cap, bounded and redacted output.

Nothing here imports Warp or user code. The harness (`warpgrad.tools.harness.main`) is what runs
inside the child; it writes one JSON document to the path in `WARPGRAD_RESULT`, because the user's
script owns stdout. Every child runs under the subreaper launcher (`reaper.py`), so no process it
starts outlives the run; the harness also runs under bubblewrap where that works (`sandbox.py`), with
an allow-listed environment. Secrets are redacted from what a run prints before it is returned.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, Field, ValidationError

from . import adopt
from .harness.protocol import (
    PROTOCOL_VERSION,
    BatchConfig,
    HarnessConfig,
    HarnessResult,
    SessionMode,
    harness_error,
)
from .kernel_cache import run_cache, shared_cache
from .sandbox import (
    Request,
    SandboxPolicy,
    SandboxUnavailable,
    bwrap_argv,
    child_env,
    detect_isolation,
    gpu_devices,
    network_requested,
    reaper_argv,
    redact,
    secret_values,
    warp_cache_dir,
)

DEFAULT_TIMEOUT_S = 300.0
DEFAULT_MEMORY_MB = 8192
TAIL_BYTES = 16_000
DRAIN_S = 2.0  # how long output is still read after the run ended, when something keeps its pipes open

# Lines Warp prints on its own; they never count as the user's output. The harness reroutes Warp's
# logger, so only what native code prints (the missing-CUDA warning) normally reaches the streams.
_WARP_CHATTER = re.compile(
    r"^(Warp \d+\.\d+\S* initialized:|   (CUDA Toolkit|Devices:|Kernel cache:)|     (\"(cpu|cuda:\d+)\"|/)"
    r"|Module \S+ [0-9a-f]+ load on device|Warp CUDA (warning|error):)"
)


class ProcessResult(BaseModel):
    """What happened to one child process."""

    argv: list[str]
    returncode: int | None = Field(None, description="Exit code; None when killed by a signal.")
    signal: str | None = Field(None, description="Signal name when the process died of one (SIGSEGV, SIGKILL...).")
    timed_out: bool = False
    cancelled: bool = Field(False, description="Killed because the caller no longer needed it (`run_harness` cancel).")
    wall_s: float = 0.0
    stdout_tail: str = ""
    stderr_tail: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    memory_limit_mb: int | None = None
    isolation: str | None = Field(None, description="bwrap or subreaper: how the process was isolated.")

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.cancelled

    def describe(self) -> str:
        """One line naming what happened, for error messages."""
        if self.timed_out:
            return f"timed out after {self.wall_s:.1f} s (killed it and every process it started)"
        if self.cancelled:
            return f"was cancelled after {self.wall_s:.1f} s (its result was no longer needed)"
        if self.signal:
            return f"crashed ({self.signal})"
        if self.returncode != 0:
            return f"exited with code {self.returncode}"
        return "exited normally"


class _Tail:
    """Keep the last `limit` bytes of a stream and count the rest, so a chatty script cannot eat memory."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.total = 0

    def feed(self, stream, ended: threading.Event) -> None:
        """Read `stream` to its end, or to DRAIN_S after `ended` is set: a process that escaped the run and
        holds the pipe open must not hold the run (nor may closing the stream wait for a blocked read)."""
        fd, drain_until = stream.fileno(), None
        poller = select.poll()  # not select(): descriptors past 1023 (a long-lived server) are fine
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while True:
            if ended.is_set() and drain_until is None:
                drain_until = time.monotonic() + DRAIN_S
            if drain_until is not None and time.monotonic() > drain_until:
                return
            if not poller.poll(100):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            self.total += len(chunk)
            self.chunks.append(chunk)
            self.size += len(chunk)
            while self.size - len(self.chunks[0]) >= self.limit:
                self.size -= len(self.chunks.popleft())

    def text(self) -> str:
        data = b"".join(self.chunks)[-self.limit :]
        return data.decode("utf-8", errors="replace")


def signal_name(num: int) -> str:
    """SIGSEGV for 11; real-time signals have no `signal.Signals` member and read "signal N"."""
    return signal.Signals(num).name if num in signal.Signals._value2member_map_ else f"signal {num}"


def strip_warp_chatter(text: str) -> str:
    """Drop Warp's init banner, module-load lines and the missing-CUDA warning from captured output."""
    return "\n".join(ln for ln in text.splitlines() if not _WARP_CHATTER.match(ln))


def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_mb: int | None = DEFAULT_MEMORY_MB,
    tail_bytes: int = TAIL_BYTES,
    sandbox: SandboxPolicy | None = None,
    isolation: Request | None = None,
    cancel: threading.Event | None = None,
) -> ProcessResult:
    """Run `argv`; at the timeout kill it with every process it started. Never raises for child failures.

    Args:
        argv: The command.
        cwd: Its working directory.
        env: Its environment (default: this process's; pass `child_env(...)` for user code).
        timeout_s: Wall-clock limit for the whole tree.
        memory_mb: Address-space cap of the command (None: none).
        tail_bytes: How much of each output stream to keep (the end).
        sandbox: Run under bubblewrap with this policy where bwrap works (None: the launcher only).
        isolation: Override `WARPGRAD_SANDBOX` (auto, bwrap, subreaper) for this run.
        cancel: Once set, the run is killed like at the timeout (its result says `cancelled`).
    """
    shown = list(argv)
    # The launcher sets the limits and then starts the command: a `preexec_fn` would run Python in the
    # forked child of a threaded parent (FD evaluations run from threads), which can deadlock.
    status_r, status_w = os.pipe()
    launch = reaper_argv(argv, memory_mb, status_w)
    used = "subreaper"
    try:
        if sandbox is not None:
            info = detect_isolation(isolation)
            if info.isolation == "bwrap":
                try:
                    launch, used = bwrap_argv(sandbox, launch, cwd=cwd, bwrap=info.bwrap_path or "bwrap"), "bwrap"
                except SandboxUnavailable as e:  # the workspace's .warpgrad is a link: nothing runs
                    os.close(status_r)
                    return ProcessResult(argv=shown, returncode=127, isolation="none", stderr_tail=f"not run: {e}")
            elif info.requested == "bwrap":
                os.close(status_r)
                return ProcessResult(argv=shown, returncode=127, isolation="none", stderr_tail=(
                    f"not run: bwrap isolation was required but is unusable: {info.reason}"))
        out, err = _Tail(tail_bytes), _Tail(tail_bytes)
        start = time.monotonic()
        try:
            with adopt.launching() as launchers:
                # What escapes a launcher that user code killed is reparented to us, and swept at the end.
                adopt.become_subreaper()
                proc = subprocess.Popen(
                    launch, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, start_new_session=True, pass_fds=(status_w,),
                )
                launchers.add(proc.pid)
        except OSError as e:
            os.close(status_r)
            return ProcessResult(argv=shown, returncode=127, stderr_tail=f"could not start {launch[0]}: {e}",
                                 isolation=used)
    finally:
        os.close(status_w)
    with os.fdopen(status_r, "rb") as status_pipe:
        return _collect(proc, out, err, start, timeout_s, status_pipe, ProcessResult(
            argv=shown, memory_limit_mb=memory_mb, isolation=used), cancel)


CANCEL_POLL_S = 0.05  # how soon a cancelled run is killed


def _wait(proc: subprocess.Popen, timeout_s: float, cancel: threading.Event | None = None) -> None:
    """`proc.wait(timeout_s)` without its polling (sleeps of up to 50 ms): a pidfd wakes us at the exit.

    Raises:
        subprocess.TimeoutExpired: The process still runs at the timeout, or `cancel` was set.
    """
    deadline = time.monotonic() + timeout_s
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # before Linux 5.3 / Python 3.9
        while True:
            try:
                proc.wait(timeout=max(min(deadline - time.monotonic(), CANCEL_POLL_S) if cancel is not None
                                      else timeout_s, 0.0))
                return
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline or (cancel is not None and cancel.is_set()):
                    raise
    try:
        while True:
            left = deadline - time.monotonic()
            if cancel is not None and cancel.is_set():
                raise subprocess.TimeoutExpired(proc.args, timeout_s)
            if select.select([fd], [], [], max(min(left, CANCEL_POLL_S) if cancel is not None else left, 0.0))[0]:
                break
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout_s)
    finally:
        os.close(fd)
    proc.wait()


def _collect(proc: subprocess.Popen, out: _Tail, err: _Tail, start: float, timeout_s: float, status_pipe,
             res: ProcessResult, cancel: threading.Event | None = None) -> ProcessResult:
    """Wait for the launcher (killing the tree at the timeout) and fill in `res`."""
    ended = threading.Event()
    readers = [threading.Thread(target=t.feed, args=(s, ended), daemon=True)
               for t, s in ((out, proc.stdout), (err, proc.stderr))]
    for r in readers:
        r.start()
    timed_out = False
    try:
        _wait(proc, timeout_s, cancel)
    except subprocess.TimeoutExpired:
        timed_out = True
        # SIGTERM makes the launcher kill the whole tree (bwrap dies, and its PID namespace with it).
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    finally:
        # Backstop: the launcher's own group must not outlive the run either.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        adopt.launcher_done(proc.pid)
        # The launcher kills its tree unless user code killed it first: then its orphans came to us.
        adopt.sweep()
        ended.set()
    for r in readers:
        r.join(timeout=DRAIN_S + 1)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    rc: int | None = proc.returncode
    # The launcher's own report is exact where bwrap turns a signal into exit code 128+N.
    word = status_pipe.read().decode("ascii", errors="replace").split()
    if len(word) == 2 and word[1].lstrip("-").isdigit():
        rc = int(word[1]) if word[0] == "exit" else -int(word[1])
    sig = None
    if rc is not None and rc < 0:
        sig = signal_name(-rc)
        rc = None
    cancelled = timed_out and cancel is not None and cancel.is_set()
    if timed_out:
        sig = None
    secrets = secret_values()
    return res.model_copy(update={
        "returncode": rc, "signal": sig, "timed_out": timed_out and not cancelled, "cancelled": cancelled, "wall_s": round(time.monotonic() - start, 3),
        "stdout_tail": redact(out.text(), secrets), "stderr_tail": redact(err.text(), secrets),
        "stdout_bytes": out.total, "stderr_bytes": err.total,
    })


R = TypeVar("R", bound=HarnessResult)


@dataclass(frozen=True)
class HarnessOutcome(Generic[R]):
    """A harness run: the process, plus the result the harness wrote (None if it never did)."""

    process: ProcessResult
    result: R | None = None

    @property
    def error(self) -> str | None:
        """Why there is no usable result, in words; None when the harness reported."""
        if self.result is not None:
            return None
        tail = strip_warp_chatter(self.process.stderr_tail).strip().splitlines()[-15:]
        return f"the harness {self.process.describe()} without reporting" + (
            ":\n" + "\n".join(tail) if tail else ""
        )


def harness_env(*, device: str | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of user code: the allow-listed part of ours (no secrets), plus the harness's own."""
    env = child_env(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    if device == "cpu":
        # Hiding CUDA makes Warp's default device the CPU even for scripts that ask for "cuda" implicitly.
        env["CUDA_VISIBLE_DEVICES"] = ""
    if extra:
        env.update(extra)
    return env


def parse_result(raw: Any, result_type: type[R]) -> R:
    """A result document as `result_type`; one that does not match the protocol becomes a harness error (ours)."""
    version = raw.get("version") if isinstance(raw, dict) else None
    if version != PROTOCOL_VERSION:
        return result_type.model_validate(harness_error(
            f"the harness wrote a result of protocol version {version}, this warpgrad reads version "
            f"{PROTOCOL_VERSION}: the parent and the harness come from different installs (reinstall warpgrad)"))
    try:
        return result_type.model_validate(raw)
    except ValidationError as e:
        return result_type.model_validate(harness_error(
            f"the harness wrote a result that does not match protocol version {PROTOCOL_VERSION} (a bug in "
            f"warpgrad, not in your script): {e}"))


class WarmRunner(Protocol):
    """Runs a harness command in a warm worker (`tools/worker.py`); None when it cannot (nothing ran)."""

    def __call__(self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float, memory_mb: int | None,
                 sandbox: SandboxPolicy, cancel: threading.Event | None = None) -> ProcessResult | None: ...


_warm_runner: WarmRunner | None = None


def set_warm_runner(runner: WarmRunner | None) -> WarmRunner | None:
    """Send `run_harness`'s runs to `runner` first (None: fresh processes only). Returns the previous one."""
    global _warm_runner
    previous, _warm_runner = _warm_runner, runner
    return previous


def run_harness(
    config: HarnessConfig,
    result_type: type[R],
    *,
    cwd: Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_mb: int | None = DEFAULT_MEMORY_MB,
    device: str | None = None,
    env_extra: dict[str, str] | None = None,
    cancel: threading.Event | None = None,
) -> HarnessOutcome[R]:
    """Start `python -m warpgrad.tools.harness.main` with `config` in the sandbox and collect its result.

    Writable inside: the workspace (`config.workspace`; `cwd` for a batch) but its `.warpgrad/`, a private
    temp dir (TMPDIR; it holds the config and the result), warpgrad's Warp kernel cache for this code (seeded
    from the user's, which stays read-only: `kernel_cache.py`) and the `outdir`/`result`/`stderr` folders
    the config names. Strings in the result are redacted of secrets like the output is.

    Args:
        config: What the harness runs.
        result_type: The result model of the config's mode (`CaptureResult` for "capture", `FdResult` for
            "fd", `HarnessResult` otherwise).
        cancel: Once set, the run is killed (its process result says `cancelled`): a caller that learns it no
            longer needs the result stops paying for it.
    """
    session = None if isinstance(config, BatchConfig) else config
    config_device = session.device if session is not None else None
    with tempfile.TemporaryDirectory(prefix="warpgrad-") as tmp:
        cfg_path = Path(tmp) / "config.json"
        res_path = Path(tmp) / "result.json"
        cfg_path.write_text(config.model_dump_json(), encoding="utf-8")
        env = harness_env(device=device or config_device,
                          extra={"WARPGRAD_RESULT": str(res_path), "TMPDIR": tmp, **(env_extra or {})})
        # The kernel cache of this code, never the user's: nothing compiled here is loaded outside the sandbox
        # or by a run of other code (`kernel_cache.py`).
        workspace = Path(session.workspace if session is not None else cwd)
        user_cache = warp_cache_dir(env)
        cache = shared_cache(os.environ) or run_cache(workspace, [(c.script, c.args) for c in _sessions(config)],
                                                      user_cache, Path(tmp), os.environ)
        env["WARP_CACHE_PATH"] = str(cache)
        policy = SandboxPolicy(workspace=workspace, writable=[Path(tmp), cache, *_config_dirs(config)],
                               read_only=[user_cache],
                               devices=gpu_devices(), network=network_requested(),
                               shm_bytes=memory_mb * 2**20 if memory_mb else None)
        if device == "cpu" or config_device == "cpu":
            mem = memory_mb
        else:
            # CUDA reserves far more address space than it uses; an RLIMIT_AS cap would break it.
            mem = memory_mb if not _cuda_possible() else None
        argv = [sys.executable, "-m", "warpgrad.tools.harness.main", str(cfg_path)]
        runner = _warm_runner
        kw: dict[str, Any] = {"cancel": cancel} if cancel is not None else {}  # a runner without it still works
        proc = None if runner is None else runner(argv, cwd=cwd, env=env, timeout_s=timeout_s, memory_mb=mem,
                                                  sandbox=policy, **kw)
        if proc is None:
            proc = run_process(argv, cwd=cwd, env=env, timeout_s=timeout_s, memory_mb=mem, sandbox=policy, cancel=cancel)
        secrets = secret_values()
        _redact_stderr_files(config, secrets)
        result = _read_result(res_path, secrets, result_type) if res_path.exists() else None
        return HarnessOutcome(process=proc, result=result)


def _read_result(path: Path, secrets: list[str], result_type: type[R]) -> R | None:
    """The result document at `path`, redacted and parsed (None when it is not JSON: a half-written one)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None
    return None if raw is None else parse_result(_redact_tree(raw, secrets), result_type)


def _sessions(config: HarnessConfig) -> list[SessionMode]:
    return list(config.batch) if isinstance(config, BatchConfig) else [config]


def _redact_stderr_files(config: HarnessConfig, secrets: list[str]) -> None:
    """Batch evaluations write their stderr to files the caller reads: redact those like the streams."""
    for c in _sessions(config):
        if c.stderr is not None:
            _redact_file(Path(c.stderr), secrets)


def _redact_file(path: Path, secrets: list[str]) -> None:
    if path.is_file() and not path.is_symlink():
        text = path.read_text(encoding="utf-8", errors="replace")
        clean = redact(text, secrets)
        if clean != text:
            path.write_text(clean, encoding="utf-8")


def read_forked_session(result: Path, stderr: Path, result_type: type[R]) -> tuple[R | None, str | None]:
    """The result and the stderr tail of a session forked from another (a batch's, an FD hub's), which wrote
    them to its own files: redacted like a run's streams (None where the session wrote nothing)."""
    secrets = secret_values()
    _redact_file(stderr, secrets)
    tail = stderr.read_text(encoding="utf-8", errors="replace")[-8000:] \
        if stderr.is_file() and not stderr.is_symlink() else None
    data = _read_result(result, secrets, result_type) if result.is_file() and not result.is_symlink() else None
    return data, tail


def _config_dirs(config: HarnessConfig) -> list[Path]:
    """The existing folders a harness config tells the harness to write into (its own and each batch item's)."""
    found = []
    for c in _sessions(config):
        dirs = [Path(c.outdir) if c.outdir is not None else None,
                *(Path(f).parent if f is not None else None for f in (c.result, c.stderr))]
        found += [p for p in dirs if p is not None and p.is_dir()]
    return found


def _redact_tree(obj: Any, secrets: list[str]) -> Any:
    if isinstance(obj, str):
        return redact(obj, secrets)
    if isinstance(obj, dict):
        return {k: _redact_tree(v, secrets) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_redact_tree(v, secrets) for v in obj]
    return obj


def _cuda_possible() -> bool:
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        return False
    return any(Path(p).exists() for p in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"))
