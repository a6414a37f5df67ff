"""An FD hub: one run of the user's script that serves every FD evaluation of an iteration from its fork point.

An FD evaluation reruns the script from the start and differs from an unperturbed run only from the first
use of a perturbed parameter in the checked iteration on: everything before (imports, module loads, the
earlier iterations) is the same in every evaluation. A hub runs that prefix once. At the first use of any role
the parent named (`ServeOptions.roles`), or at the iteration's end or the script's end when none is used, it
listens on a unix socket; each evaluation the parent sends (`ServeRequest`) is a process forked from there
that takes its perturbation, its result path and its streams, and returns into the user's script to run to the
iteration's end, as a fresh FD run would from the same state (same seeds, same arrays, bit for bit).

Fork safety is `forking`'s: the hub runs its prefix with one-thread BLAS pools, and where the script has
started a thread of its own, or put an array on a GPU (a CUDA context does not survive a fork), by the fork
point, the hub forks nothing and says why (`ServeReport.refused`); the parent then runs each evaluation from
the start. Past the fork point the hub never returns into the
user's script: it answers requests until the parent closes the socket (or is silent for `idle_s`), writes
its own result and exits.
"""

from __future__ import annotations

import os
import socket
import time
from typing import TYPE_CHECKING

from pydantic import ValidationError

from . import forking, module_files
from .protocol import BatchEntry, ServeEvaluation, ServeOptions, ServeReply, ServeReport, ServeRequest

if TYPE_CHECKING:
    from .main import Session

class _HubSection:
    """The hub's section of its own result (`fd_serve`), added to the session's listeners at the fork point."""

    key = "fd_serve"
    broken: str | None = None

    def __init__(self, report: ServeReport) -> None:
        self.report = report

    def result(self) -> ServeReport:
        return self.report


def serve(session: Session, options: ServeOptions, at: str) -> ServeEvaluation:
    """Fork the evaluations the parent asks for, from here.

    Returns only in a forked evaluation, set up to continue the script (streams, result path, BLAS threads):
    the caller applies the returned perturbation. In the hub it never returns: it serves, writes its result and
    exits, whatever happens (an exception here must not let the hub run on into the user's script).
    """
    section = _HubSection(ServeReport(forked_at=at))
    session.listeners.append(section)
    try:
        threads = forking.thread_count()
        if threads > 1:
            section.report.refused = (f"{threads} threads were alive when the run reached {at}: forking now could "
                                      "deadlock the evaluations")
        elif _cuda_in_use():
            section.report.refused = (f"the script had used a CUDA device when the run reached {at}: a CUDA "
                                      "context does not survive a fork")
        else:
            module_files.prime()  # each evaluation lists the files it imported: resolve them once, here
            forking.freeze_heap()
            picked = _serve(session, options, section)
            if picked is not None:
                return picked
    except BaseException as e:  # noqa: BLE001 - the hub must end here, with its result, whatever failed
        section.report.listener_error = f"{type(e).__name__}: {e}"
    session.finish("completed")
    os._exit(0)  # finish exits; this line is for the type checker and for a finish already done


def _cuda_in_use() -> bool:
    """A CUDA device holds a context in this process (the parent only asks for a hub on the CPU, but a script
    may still put arrays on a GPU itself)."""
    import warp as wp

    return any(d.has_context for d in wp.get_cuda_devices())


def _serve(session: Session, options: ServeOptions, section: _HubSection) -> ServeEvaluation | None:
    """The hub's loop: one `ServeReply` per `ServeRequest` line. In a forked evaluation, its evaluation."""
    listen = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listen.bind(options.socket)
    listen.listen(1)
    listen.settimeout(options.idle_s)
    try:
        conn, _ = listen.accept()
    except TimeoutError:
        section.report.listener_error = f"the parent did not connect within {options.idle_s:g} s"
        return None
    conn.settimeout(options.idle_s)
    lines = conn.makefile("rb")
    while True:
        try:
            line = lines.readline()
        except TimeoutError:
            return None  # the parent went quiet: nothing more to serve
        if not line:
            return None  # the parent closed the socket: done
        try:
            request = ServeRequest.model_validate_json(line)
        except ValidationError as e:
            section.report.listener_error = f"an invalid request (a bug in warpgrad): {e}"
            return None
        section.report.requests += 1
        ran = _run(request.evaluations, options.jobs, (lines, conn, listen), session, section)
        if isinstance(ran, ServeEvaluation):
            return ran
        section.report.served += len(ran)
        conn.sendall(ServeReply(entries=ran).model_dump_json().encode() + b"\n")


def _run(evaluations: list[ServeEvaluation], jobs: int, owned: tuple, session: Session,
         section: _HubSection) -> ServeEvaluation | list[BatchEntry]:
    """Fork each evaluation, `jobs` at a time, each killed at its own time limit; how each ended, in order.

    In a forked evaluation, returns that evaluation (set up by `_become`)."""
    ran = forking.fork_each([e.timeout_s for e in evaluations], jobs)
    return _become(evaluations[ran], owned, session, section) if isinstance(ran, int) else ran


def _become(evaluation: ServeEvaluation, owned: tuple, session: Session, section: _HubSection) -> ServeEvaluation:
    """Turn the forked process into the evaluation: the hub's sockets closed, its own result path, stdout
    discarded and stderr to its file (as a batch's session), the user's BLAS threads, its own clock."""
    for obj in owned:
        obj.close()
    session.listeners.remove(section)
    os.environ["WARPGRAD_RESULT"] = evaluation.result
    session.result_path = evaluation.result
    session.started = time.monotonic()
    forking.redirect_streams(evaluation.stderr)
    forking.start_pool()
    return evaluation
