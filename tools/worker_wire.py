"""The messages between a warm harness worker (`tools/harness/worker.py`) and its client (`tools/worker.py`).

One connection per run, over a `SOCK_SEQPACKET` unix socket (each message one packet, JSON):

1. worker → client `WorkerHello`: the files the worker imported and their sha256, so the client can
   refuse a worker whose code is older than the files on disk;
2. client → worker `WorkerRequest` (with the run's stdout and stderr as passed descriptors), or
   `quit=True` to retire a stale worker;
3. worker → client `WorkerStarted` once the run's process exists (before it, a failure is the worker's
   and the client falls back to a fresh process; after it, the run counts as started);
4. worker → client `WorkerDone`: how the run's process ended. Closing the connection before this
   message kills the run and every process it started.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

MAX_MESSAGE = 1 << 20


class WorkerHello(BaseModel):
    """Sent by the worker when it accepts a connection."""

    pid: int = Field(description="The worker's process id (inside its sandbox).")
    files: dict[str, str] = Field(default_factory=dict, description="Absolute path -> sha256 of every source file "
                                  "the worker itself imported (warpgrad's harness, preloaded user modules).")


class WorkerRequest(BaseModel):
    """One harness run: what `python -m warpgrad.tools.harness.main CONFIG` would do in `cwd` with `env`."""

    config: str = Field("", description="Path of the harness config (under a directory the worker can write).")
    cwd: str = ""
    env: dict[str, str] = Field(default_factory=dict, description="The run's whole environment.")
    memory_mb: int | None = Field(None, description="Address-space cap of the run (None: none).")
    quit: bool = Field(False, description="Retire the worker: it accepts no more runs and exits when idle.")


class WorkerStarted(BaseModel):
    pid: int = Field(description="The run's process id (inside the worker's sandbox).")


class WorkerDone(BaseModel):
    """How the run's process ended: an exit code or a signal number."""

    exit_code: int | None = None
    signal: int | None = None


class WorkerBoot(BaseModel):
    """The worker's command-line argument (one JSON document)."""

    listen_fd: int = Field(description="An inherited, listening SOCK_SEQPACKET socket.")
    idle_s: float = Field(600.0, description="Exit after this long with no connection and no run.")
    workspace: str = Field(description="Files under it (and under warpgrad) are hashed in WorkerHello.")
    sys_path: list[str] = Field(default_factory=list, description="Prepended to sys.path for the preload only.")
    modules: list[str] = Field(default_factory=list, description="User modules to import once, at boot.")
