"""The CLI's side of the warm server: forward a command to it, start it, ask its status, stop it.

Kept light (the standard library and pydantic): it runs before the command tree is built, on every command.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from ...tools.keys import key_dir

SERVER_ENV = "WARPGRAD_SERVER"
IDLE_ENV = "WARPGRAD_SERVER_IDLE_S"
DEFAULT_IDLE_S = 300.0
MAX_MESSAGE = 1 << 20
# A unix socket path is at most 107 bytes on Linux: past that the server is simply not used.
_MAX_SOCKET_PATH = 100
_CHILD = False
"""True in a command the server runs: it never starts (or forwards to) a server of its own."""


def enabled(env: Mapping[str, str]) -> bool:
    """`WARPGRAD_SERVER=1` on, `=0` off; unset: on, except under CI (a job's last command must leave nothing
    running) and where file-descriptor passing and fork are not there (not Linux)."""
    if sys.platform != "linux" or _CHILD:
        return False
    value = env.get(SERVER_ENV, "").strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    return env.get("CI", "").strip().lower() in ("", "0", "false")


def idle_s(env: Mapping[str, str]) -> float:
    try:
        return max(1.0, float(env.get(IDLE_ENV, DEFAULT_IDLE_S)))
    except ValueError:
        return DEFAULT_IDLE_S


def package_dir() -> Path:
    """The warpgrad this process runs (a server serves one installation)."""
    return Path(__file__).resolve().parents[2]


def server_dir(env: Mapping[str, str] | None = None) -> Path:
    """Beside the ledger's signing key: private to the user and masked in every sandbox (`sandbox.bwrap_argv`)."""
    return key_dir(env) / "server"


def _name(env: Mapping[str, str]) -> str:
    """One server per Python, warpgrad installation and import path: a command never runs in a server of other
    code (warpgrad's own files changing is the server's to notice: it exits)."""
    ident = "\0".join([sys.executable, str(package_dir()), env.get("PYTHONPATH", "")])
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def socket_path_in(env: Mapping[str, str]) -> Path:
    """The server socket a process with environment `env` (this Python, this warpgrad) would use."""
    return server_dir(env) / f"{_name(env)}.sock"


def socket_path() -> Path:
    return socket_path_in(os.environ)


def commands_path() -> Path:
    """The commands the server runs, one per line, written by it when it boots (from the tools' declarations):
    the caller offers it nothing else, and pays nothing for a command it would refuse."""
    return server_dir() / f"{_name(os.environ)}.commands"


def log_path() -> Path:
    """The server's stderr (what it could not do, a traceback of its own)."""
    return server_dir() / f"{_name(os.environ)}.log"


def lock_path() -> Path:
    """Held (flock) by the server for its whole life: at most one per name, booting or serving."""
    return server_dir() / f"{_name(os.environ)}.lock"


def private_dir() -> Path | None:
    """The server folder, made 0700 when missing; None when it is not this user's alone (then no server)."""
    d = server_dir()
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = d.lstat()
    except OSError:
        return None
    if not d.is_dir() or d.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return d


@contextlib.contextmanager
def _connected() -> Iterator[socket.socket | None]:
    path = socket_path()
    if len(str(path)) > _MAX_SOCKET_PATH or not path.exists():
        yield None
        return
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(str(path))
    except OSError:  # not listening (booting, or gone and its socket left behind)
        s.close()
        yield None
        return
    with s:
        yield s


def _reply(s: socket.socket):  # -> wire.Reply; the import is deferred with the rest of pydantic
    from .wire import REPLY

    data = s.recv(MAX_MESSAGE)
    if not data:
        return None
    return REPLY.validate_json(data)


def forward(argv: list[str]) -> int | None:
    """Run `warpgrad ARGV` in the warm server and return its exit status; None when it is not run there (no
    server, or the server declines: not a command it serves, warpgrad changed), and the caller runs it."""
    if not argv or not enabled(os.environ) or private_dir() is None:
        return None
    try:
        served = commands_path().read_text(encoding="utf-8").split()
    except OSError:
        return None  # no server (or one still booting)
    if argv[0] not in served:
        return None
    fds = [0, 1, 2]
    try:
        for fd in fds:
            os.fstat(fd)
    except OSError:  # a closed standard stream: nothing to hand over
        return None
    with _connected() as s:
        if s is None:
            return None
        from .wire import CommandRequest, Exited, Refused, Started

        mask = os.umask(0o022)  # read by setting it (this process is single-threaded here), and put back
        os.umask(mask)
        req = CommandRequest(argv=argv, cwd=os.getcwd(), env=dict(os.environ), umask=mask)
        try:
            socket.send_fds(s, [req.model_dump_json().encode()], fds)
            first = _reply(s)
        except OSError:
            return None
        if first is None or isinstance(first, Refused) or not isinstance(first, Started):
            return None
        try:
            last = _reply(s)
        except KeyboardInterrupt:
            return 130  # closing the connection interrupts the command (the server sends it SIGINT)
        except OSError:
            last = None
        if isinstance(last, Exited):
            return last.code
        print("warpgrad: the warm server ended before the command did (exit 3); run it again, or set "
              f"{SERVER_ENV}=0 to run commands in their own process", file=sys.stderr)
        return 3


def running() -> bool:
    """A server holds the lock (booting or serving)."""
    try:
        with open(lock_path(), "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(f, fcntl.LOCK_UN)
            return False
    except OSError:
        return False


def start() -> int | None:
    """Start the server for this installation in the background, detached from this process and its terminal;
    its pid, or None when one is there already or it cannot be (the folder is not private, a path too long)."""
    if not enabled(os.environ) or private_dir() is None or len(str(socket_path())) > _MAX_SOCKET_PATH or running():
        return None
    with open(log_path(), "w", encoding="utf-8") as log:
        proc = subprocess.Popen([sys.executable, "-m", "warpgrad.cli.warm.daemon"], cwd="/", env=dict(os.environ),
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                close_fds=True)
    return proc.pid


def start_at_exit() -> None:
    """After this command (it runs in its own process), start the server for the next ones, and say so."""
    if not enabled(os.environ):
        return

    def go() -> None:
        pid = start()
        if pid is not None:
            print(f"warpgrad: started a warm server (pid {pid}) so the next commands skip loading Python, the tools "
                  f"and Warp; it exits after {idle_s(os.environ):.0f} s idle. `warpgrad server stop` stops it, "
                  f"{SERVER_ENV}=0 turns it off.", file=sys.stderr)

    atexit.register(go)


def control(kind: str):  # -> wire.Status | wire.Refused | None
    """Ask the running server for its status, or to stop; None when none answers."""
    with _connected() as s:
        if s is None:
            return None
        from .wire import ControlRequest

        s.send(ControlRequest(kind=kind).model_dump_json().encode())  # type: ignore[arg-type]
        return _reply(s)
