"""Run user code in a subprocess: own process group, wall-clock timeout, memory cap, bounded output.

Nothing here imports Warp or user code. The harness (`warpgrad.tools.harness.main`) is what runs
inside the child; it writes one JSON document to the path in `WARPGRAD_RESULT`, because the user's
script owns stdout.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

DEFAULT_TIMEOUT_S = 300.0
DEFAULT_MEMORY_MB = 8192
TAIL_BYTES = 16_000

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
    wall_s: float = 0.0
    stdout_tail: str = ""
    stderr_tail: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    memory_limit_mb: int | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def describe(self) -> str:
        """One line naming what happened, for error messages."""
        if self.timed_out:
            return f"timed out after {self.wall_s:.1f} s (killed the process group)"
        if self.signal:
            return f"crashed ({self.signal})"
        if self.returncode != 0:
            return f"exited with code {self.returncode}"
        return "exited normally"


_LIMIT_LAUNCHER = (
    "import os, resource, sys\n"
    "cap = int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_AS, (cap, cap))\n"
    "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
    "try:\n"
    "    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "except OSError as e:\n"
    "    sys.stderr.write(f'could not start {sys.argv[2]}: {e}\\n')\n"
    "    sys.exit(127)\n"
)


class _Tail:
    """Keep the last `limit` bytes of a stream and count the rest, so a chatty script cannot eat memory."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.total = 0

    def feed(self, stream) -> None:
        for chunk in iter(lambda: stream.read(8192), b""):
            self.total += len(chunk)
            self.chunks.append(chunk)
            self.size += len(chunk)
            while self.size - len(self.chunks[0]) >= self.limit:
                self.size -= len(self.chunks.popleft())

    def text(self) -> str:
        data = b"".join(self.chunks)[-self.limit :]
        return data.decode("utf-8", errors="replace")


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
) -> ProcessResult:
    """Run `argv` in its own session; kill the whole group on timeout. Never raises for child failures."""

    shown = list(argv)
    if memory_mb:
        # The limits are set by a tiny launcher that then execs the command: a `preexec_fn` would run Python
        # in the forked child of a threaded parent (FD evaluations run from threads), which can deadlock.
        argv = [sys.executable, "-c", _LIMIT_LAUNCHER, str(memory_mb * 2**20), *argv]
    out, err = _Tail(tail_bytes), _Tail(tail_bytes)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as e:
        return ProcessResult(argv=shown, returncode=127, stderr_tail=f"could not start {shown[0]}: {e}")
    readers = [threading.Thread(target=t.feed, args=(s,), daemon=True) for t, s in ((out, proc.stdout), (err, proc.stderr))]
    for r in readers:
        r.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # The group may hold grandchildren even after a clean exit; they must not outlive the run.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    for r in readers:
        r.join(timeout=5)
    for stream in (proc.stdout, proc.stderr):
        stream.close()
    rc = proc.returncode
    sig = None
    if rc is not None and rc < 0:
        sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else f"signal {-rc}"
        rc = None
    if timed_out:
        sig = None
    return ProcessResult(
        argv=shown, returncode=rc, signal=sig, timed_out=timed_out, wall_s=round(time.monotonic() - start, 3),
        stdout_tail=out.text(), stderr_tail=err.text(), stdout_bytes=out.total, stderr_bytes=err.total,
        memory_limit_mb=memory_mb,
    )


class HarnessOutcome(BaseModel):
    """A harness run: the process, plus the JSON document the harness wrote (None if it never did)."""

    process: ProcessResult
    data: dict[str, Any] | None = None

    @property
    def error(self) -> str | None:
        """Why there is no usable result, in words; None when the harness reported."""
        if self.data is not None:
            return None
        tail = strip_warp_chatter(self.process.stderr_tail).strip().splitlines()[-15:]
        return f"the harness {self.process.describe()} without reporting" + (
            ":\n" + "\n".join(tail) if tail else ""
        )


def harness_env(*, device: str | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    if device == "cpu":
        # Hiding CUDA makes Warp's default device the CPU even for scripts that ask for "cuda" implicitly.
        env["CUDA_VISIBLE_DEVICES"] = ""
    if extra:
        env.update(extra)
    return env


def run_harness(
    config: dict[str, Any],
    *,
    cwd: Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_mb: int | None = DEFAULT_MEMORY_MB,
    device: str | None = None,
    env_extra: dict[str, str] | None = None,
) -> HarnessOutcome:
    """Start `python -m warpgrad.tools.harness.main` with `config` and collect its JSON report."""
    with tempfile.TemporaryDirectory(prefix="warpgrad-") as tmp:
        cfg_path = Path(tmp) / "config.json"
        res_path = Path(tmp) / "result.json"
        cfg_path.write_text(json.dumps(config), encoding="utf-8")
        env = harness_env(device=device or config.get("device"), extra={"WARPGRAD_RESULT": str(res_path), **(env_extra or {})})
        if device == "cpu" or config.get("device") == "cpu":
            mem = memory_mb
        else:
            # CUDA reserves far more address space than it uses; an RLIMIT_AS cap would break it.
            mem = memory_mb if not _cuda_possible() else None
        proc = run_process(
            [sys.executable, "-m", "warpgrad.tools.harness.main", str(cfg_path)], cwd=cwd, env=env,
            timeout_s=timeout_s, memory_mb=mem,
        )
        data = None
        if res_path.exists():
            try:
                data = json.loads(res_path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                data = None
        return HarnessOutcome(process=proc, data=data)


def _cuda_possible() -> bool:
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        return False
    return any(Path(p).exists() for p in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"))
