"""The parent's side of an FD hub (`harness/serve.py`): start it, send it evaluations, close it.

A hub is one harness run in mode "fd" with `serve` options. It runs the user's script to the checked
iteration's first perturbed use and then forks each evaluation the parent sends from there, so the
script's start (imports, module loads, earlier iterations) is paid once per iteration instead of once per
evaluation. The run goes through `run_harness` like any other (sandbox, worker, time and memory limits), on
a thread of its own that returns when the hub exits; the parent talks to it over a unix socket in the FD
check's private temp folder.

Every failure comes back as `None` from `run`: the caller then runs the evaluations from the start as before,
and the hub's own outcome (`outcome`) says what happened.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path
from typing import BinaryIO

from pydantic import ValidationError

from .child_process import HarnessOutcome, run_harness
from .harness.protocol import BatchEntry, FdConfig, FdResult, ServeEvaluation, ServeReply, ServeRequest

_CONNECT_POLL_S = 0.005


class FdHub:
    """One hub: `start`, then `run` batches of evaluations, then `close` (also on every failure path)."""

    def __init__(self, config: FdConfig, *, cwd: Path, timeout_s: float, device: str | None) -> None:
        serve = config.capture.serve
        if serve is None:
            raise ValueError("an FdHub needs a config with serve options")
        self.config = config
        self.roles = frozenset(serve.roles)
        self.socket_path = Path(serve.socket)
        self.outcome: HarnessOutcome[FdResult] | None = None
        self._conn: socket.socket | None = None
        self._lines: BinaryIO | None = None
        self._dead = False
        self._thread = threading.Thread(target=self._run_hub, args=(cwd, timeout_s, device), daemon=True,
                                        name="warpgrad-fd-hub")

    def start(self) -> None:
        self._thread.start()

    def _run_hub(self, cwd: Path, timeout_s: float, device: str | None) -> None:
        self.outcome = run_harness(self.config, FdResult, cwd=cwd, timeout_s=timeout_s, device=device)

    def _connect(self) -> bool:
        """Wait until the hub listens (it has run the script to its fork point) or has ended without it."""
        while self._conn is None:
            if not self._thread.is_alive():
                return False
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                conn.connect(str(self.socket_path))
            except (FileNotFoundError, ConnectionRefusedError):
                conn.close()
                time.sleep(_CONNECT_POLL_S)
                continue
            self._conn, self._lines = conn, conn.makefile("rb")
        return True

    def run(self, evaluations: list[ServeEvaluation]) -> list[BatchEntry] | None:
        """How each evaluation ended (its result is in its own files), or None when the hub cannot serve: it
        ended before its fork point, refused to fork, or died during this request."""
        if self._dead or not self._connect() or self._conn is None or self._lines is None:
            self._dead = True
            return None
        try:
            self._conn.sendall(ServeRequest(evaluations=evaluations).model_dump_json().encode() + b"\n")
            line = self._lines.readline()
            reply = ServeReply.model_validate_json(line) if line else None
        except (OSError, ValidationError):
            reply = None
        if reply is None or len(reply.entries) != len(evaluations):
            self._dead = True
            return None
        return reply.entries

    @property
    def ended_early(self) -> bool:
        """The hub's run ended before it served anything (its outcome says why)."""
        return self._dead and self.outcome is not None and (
            self.outcome.result is None or self.outcome.result.fd_serve is None
            or self.outcome.result.fd_serve.requests == 0)

    def close(self) -> HarnessOutcome[FdResult] | None:
        """Tell the hub to finish (closing the socket) and wait for its run to end; its outcome."""
        if self._conn is None and not self._dead:
            self._connect()  # a hub still on its way to the fork point would otherwise wait idle_s for us
        if self._lines is not None:
            self._lines.close()
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.shutdown(socket.SHUT_RDWR)
            self._conn.close()
        self._conn = self._lines = None
        self._dead = True
        if self._thread.ident is not None:  # started
            self._thread.join()
        return self.outcome
