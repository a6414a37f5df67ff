"""The warm server: load the command tree, the tools and a warm worker once; run each command in a fork.

`python -m warpgrad.cli.warm.daemon`, started by `client.start` (see the package doc for what it promises).
One thread serves: it accepts a connection, checks the peer, and forks a child per command; the child takes
the caller's streams, folder, environment and arguments and runs the CLI's `main`, as a fresh process
would. The worker pool (`tools/worker.py`) is the server's own, as the MCP server's is: it boots workers,
and the forked commands send their harness runs to them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import selectors
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass, field

from pydantic import BaseModel, ValidationError

from . import client
from .wire import REQUEST, CommandRequest, ControlRequest, Exited, Refused, Started, Status

# A command whose caller went away (Ctrl-C) gets SIGINT, as in a terminal, then SIGKILL this much later.
_INTERRUPT_GRACE_S = 3.0
_POLL_S = 0.05
_RECEIVE_S = 5.0


@dataclass
class _Running:
    conn: socket.socket
    interrupted_at: float | None = None


@dataclass
class _Server:
    listen: socket.socket
    lock_fd: int
    idle_exit_s: float
    forking: frozenset[str]
    sources: dict[str, tuple[int, int]]
    started: float = field(default_factory=time.monotonic)
    last_active: float = field(default_factory=time.monotonic)
    served: int = 0
    stopping: bool = False
    children: dict[int, _Running] = field(default_factory=dict)
    sel: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)


def _sources() -> dict[str, tuple[int, int]]:
    """(mtime_ns, size) of every warpgrad module this process loaded: a change means new code, and a server
    of old code must not answer for it."""
    root = str(client.package_dir()) + os.sep
    out = {}
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f and f.startswith(root):
            with contextlib.suppress(OSError):
                st = os.stat(f)
                out[f] = (st.st_mtime_ns, st.st_size)
    return out


def _changed(sources: dict[str, tuple[int, int]]) -> bool:
    """A file of `sources` is gone or differs in time or size from when it was recorded."""
    for f, sig in sources.items():
        try:
            st = os.stat(f)
        except OSError:
            return True
        if (st.st_mtime_ns, st.st_size) != sig:
            return True
    return False


def _boot() -> frozenset[str]:
    """Everything a forked command would import: the command tree and each forking command's tool (its options
    are built now, so a child parses its arguments at once). The names of the forking commands."""
    import click
    import numpy.random  # noqa: F401 - what a diagnose imports on its way (its FD directions)

    from .. import core
    from ..main import command

    group = command()
    names: set[str] = set()
    for name, cmd in group.commands.items():
        if isinstance(cmd, core.ModelCommand) and cmd.declared.forks:
            cmd.get_params(click.Context(cmd))  # a throwaway context: building the options needs one
            names.add(name)
    return frozenset(names)


def _peer_ok(conn: socket.socket) -> str | None:
    """Why the peer may not use this server (None: it may). Same user, and the same mount namespace: a process
    in a sandbox (bubblewrap makes a new one) must not run commands outside it, even if it found the socket."""
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    if uid != os.getuid():
        return "another user"
    try:
        if os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt"):
            return "a process in another mount namespace (a sandbox)"
    except OSError:
        return "a process whose namespace cannot be read"
    return None


def _reply(conn: socket.socket, msg: BaseModel) -> None:
    with contextlib.suppress(OSError):
        conn.send(msg.model_dump_json().encode())


def _accept(srv: _Server) -> None:
    conn, _ = srv.listen.accept()
    conn.settimeout(_RECEIVE_S)  # one thread serves: a peer that connects and says nothing must not hold it
    try:
        data, fds, _flags, _addr = socket.recv_fds(conn, client.MAX_MESSAGE, 3)
    except OSError:
        conn.close()
        return
    try:
        why = _peer_ok(conn)
        if why is not None:
            _reply(conn, Refused(reason=f"the server does not serve {why}"))
            conn.close()
            return
        try:
            req = REQUEST.validate_json(data)
        except ValidationError as e:
            _reply(conn, Refused(reason=f"not a request: {e.errors()[0]['msg']}"))
            conn.close()
            return
        if isinstance(req, ControlRequest):
            _control(srv, conn, req)
            return
        _command(srv, conn, req, fds)
    finally:
        for fd in fds:  # the server's copies (a forked command has its own): a pipe left open here would
            os.close(fd)  # keep the caller's reader waiting for its end


def _control(srv: _Server, conn: socket.socket, req: ControlRequest) -> None:
    if req.kind == "stop":
        srv.stopping = True
    _reply(conn, Status(pid=os.getpid(), python=sys.executable, package=str(client.package_dir()),
                        started_s_ago=round(time.monotonic() - srv.started, 1), idle_exit_s=srv.idle_exit_s,
                        commands_served=srv.served, running=len(srv.children), stopping=srv.stopping))
    conn.close()


def _command(srv: _Server, conn: socket.socket, req: CommandRequest, fds: list[int]) -> None:
    if len(fds) != 3:
        _reply(conn, Refused(reason="the request did not carry stdin, stdout and stderr"))
        conn.close()
        return
    if srv.stopping:
        _reply(conn, Refused(reason="the server is stopping"))
        conn.close()
        return
    if _changed(srv.sources):
        srv.stopping = True
        _reply(conn, Refused(reason="warpgrad's files changed since the server started"))
        conn.close()
        return
    if req.argv[0] not in srv.forking or "--help" in req.argv:
        _reply(conn, Refused(reason=f"{req.argv[0]!r} is not a command the server runs"))
        conn.close()
        return
    _prewarm(req)
    pid = os.fork()
    if pid == 0:
        _child(srv, req, fds)  # never returns
    srv.served += 1
    srv.children[pid] = _Running(conn)
    srv.sel.register(conn, selectors.EVENT_READ, pid)
    _reply(conn, Started(pid=pid))


def _prewarm(req: CommandRequest) -> None:
    """Boot the worker this command's runs will fork from, with the caller's environment, in this process (its
    owner): a forked command can use a worker but not start one."""
    from ...tools.worker import shared_pool
    from ..core import _early_workspace

    pool = shared_pool()
    if pool is None:
        return
    os.environ.clear()
    os.environ.update(req.env)
    with contextlib.suppress(OSError):
        os.chdir(req.cwd)
        early = _early_workspace(req.argv[1:])
        if early is not None:
            pool.prewarm(*early)
    os.chdir("/")


def _child(srv: _Server, req: CommandRequest, fds: list[int]) -> None:
    """The forked command: the caller's streams, folder, environment and arguments, then the CLI's main."""
    code = 70
    try:
        os.setpgid(0, 0)  # its own group: the server interrupts or kills the command and what it started
        srv.sel.close()
        srv.listen.close()
        os.close(srv.lock_fd)  # the server's lock must end with the server, not with a command it started
        for r in srv.children.values():
            r.conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.environ.clear()
        os.environ.update(req.env)
        os.chdir(req.cwd)
        os.umask(req.umask)  # files the command writes get the caller's permissions, not the server's
        client._CHILD = True
        _fresh_streams()
        sys.argv = ["warpgrad", *req.argv]
        code = _run_main()
    except BaseException:  # noqa: BLE001 - a failure here must still end this process, never the server's loop
        code = 70
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _fresh_streams() -> None:
    """Text streams on the caller's descriptors, made as Python makes them at start-up (line-buffered on a
    terminal), and rich's consoles made again: they decide colour and width when made."""
    tty = os.isatty(1)
    sys.stdin = open(0, encoding=sys.stdin.encoding, errors=sys.stdin.errors, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding=sys.stdout.encoding, errors=sys.stdout.errors, closefd=False,  # noqa: SIM115
                      buffering=1 if tty else -1)
    sys.stderr = open(2, "w", encoding=sys.stderr.encoding, errors="backslashreplace", closefd=False,  # noqa: SIM115
                      buffering=1)
    from rich.console import Console

    from .. import core

    for console in (core.console, core.out):
        Console.__init__(console, stderr=console.stderr)


def _run_main() -> int:
    from ..main import main

    try:
        main()
    except SystemExit as e:
        if e.code is None:
            return 0
        if isinstance(e.code, int):
            return e.code
        print(e.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _reap(srv: _Server) -> None:
    # Each command by its pid: the worker pool's launcher is a child of this process too, and its Popen reaps it.
    for pid in list(srv.children):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, 0
        if done == 0:
            continue
        run = srv.children.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        _reply(run.conn, Exited(code=code if code >= 0 else 128 - code))
        with contextlib.suppress(KeyError, ValueError):
            srv.sel.unregister(run.conn)
        run.conn.close()
        srv.last_active = time.monotonic()


def _caller_gone(srv: _Server, pid: int) -> None:
    """The caller closed its end (Ctrl-C, or it was killed): interrupt the command as a terminal would."""
    run = srv.children.get(pid)
    if run is None or run.interrupted_at is not None:
        return
    with contextlib.suppress(KeyError, ValueError):
        srv.sel.unregister(run.conn)
    run.interrupted_at = time.monotonic()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGINT)


def _kill_overdue(srv: _Server) -> None:
    now = time.monotonic()
    for pid, run in srv.children.items():
        if run.interrupted_at is not None and now - run.interrupted_at > _INTERRUPT_GRACE_S:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def serve(srv: _Server) -> None:
    srv.sel.register(srv.listen, selectors.EVENT_READ, None)
    while True:
        for key, _ in srv.sel.select(_POLL_S):
            if key.data is None:
                _accept(srv)
            else:
                _caller_gone(srv, key.data)
        _reap(srv)
        _kill_overdue(srv)
        if srv.children:
            srv.last_active = time.monotonic()
        elif srv.stopping or time.monotonic() - srv.last_active > srv.idle_exit_s:
            return


def main() -> None:
    folder = client.private_dir()
    if folder is None:
        return
    with open(client.lock_path(), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # another server of this installation is booting or serving
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        forking = _boot()
        from ...tools.worker import shared_pool

        shared_pool()
        path = client.socket_path()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        listen = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        old = os.umask(0o177)
        try:
            listen.bind(str(path))
        finally:
            os.umask(old)
        listen.listen(16)
        commands = client.commands_path()
        commands.write_text("".join(f"{n}\n" for n in sorted(forking)), encoding="utf-8")
        srv = _Server(listen=listen, lock_fd=lock.fileno(), idle_exit_s=client.idle_s(os.environ), forking=forking, sources=_sources())
        try:
            serve(srv)
        finally:
            for own in (path, commands):  # ours: the lock is still held
                with contextlib.suppress(FileNotFoundError):
                    own.unlink()
            listen.close()


if __name__ == "__main__":
    main()
