"""Run one command as a child and kill every descendant of it when it ends or when told to stop.

Started by the runner as `python -I -S reaper.py CAP_BYTES STATUS_FD CMD...` (a plain script: no warpgrad
import, so it starts in milliseconds, also inside bubblewrap). It marks itself a child subreaper
(`PR_SET_CHILD_SUBREAPER`), so any process the command starts, in a new session or after a double
fork, is reparented to it rather than to init when its parent dies: nothing the command starts can
leave the tree this process owns. When the command exits, or on SIGTERM/SIGINT/SIGHUP (the runner's
timeout), or when the runner itself dies (`PR_SET_PDEATHSIG`), every remaining descendant gets SIGKILL.

The exit status is the command's: its exit code, or the same signal raised again on this process.
Under bubblewrap a signal death reaches the runner only as an exit code (bwrap exits 128+N), so the
status is also written, as `exit N` or `signal N`, to STATUS_FD when that is not -1.
The memory cap (`RLIMIT_AS`, 0 = none) is set in the command's process only, never on this one; so is
`no_new_privs`, the mark by which the runner (`adopt.py`) finds the command's processes if this one is
killed before it could kill them.
"""

import contextlib
import ctypes
import os
import resource
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}) failed: {os.strerror(err)}")


def descendants(root: int) -> list[int]:
    """Every live process below `root`, read from /proc (children before grandchildren)."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # exited while we looked
        # The command name (field 2) may hold spaces and parentheses; the fields after the last ')' do not.
        fields = stat[stat.rfind(b")") + 2 :].split()
        parent[int(name)] = int(fields[1])
    out, frontier = [], [root]
    while frontier:
        kids = [pid for pid, ppid in parent.items() if ppid in frontier]
        out += kids
        frontier = kids
    return out


def kill_all() -> None:
    """SIGKILL every descendant and reap them until no child is left.

    A process forked between the scan and the kill is reparented to us when its parent dies, so the
    next pass finds it. No child left means no descendant left: orphans always come back to us.
    """
    me = os.getpid()
    while True:
        for pid in descendants(me):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            while True:
                pid, _ = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
        except ChildProcessError:
            return
        time.sleep(0.005)


def _stop(signum: int, frame: object) -> None:
    kill_all()
    os._exit(128 + signum)


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        sys.stderr.write("usage: reaper.py CAP_BYTES STATUS_FD CMD...\n")
        return 2
    cap, status_fd, cmd = int(argv[1]), int(argv[2]), argv[3:]
    if status_fd >= 0:
        os.set_inheritable(status_fd, False)  # the command must not hold it
    parent = os.getppid()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    if os.getppid() != parent:  # the runner died before PR_SET_PDEATHSIG took effect
        return 137
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # for us too: we may re-raise the command's signal
    child = os.fork()
    if child == 0:
        try:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            if cap > 0:
                resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            # A flag every descendant inherits and none can clear: if the command kills us, the runner (a
            # subreaper too, `adopt.py`) knows its orphans by it. It also keeps setuid programs from gaining
            # privileges, as under bwrap.
            _prctl(PR_SET_NO_NEW_PRIVS, 1)
            os.execvp(cmd[0], cmd)
        except OSError as e:
            sys.stderr.write(f"could not start {cmd[0]}: {e}\n")
            sys.stderr.flush()
        os._exit(127)
    status = None
    while status is None:
        pid, st = os.waitpid(-1, 0)  # also reaps orphans reparented to us meanwhile
        if pid == child:
            status = st
    kill_all()
    if status_fd >= 0:
        word = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
        os.write(status_fd, word.encode())
        os.close(status_fd)
    if os.WIFSIGNALED(status):
        died_of = os.WTERMSIG(status)  # an int: real-time signals have no `signal.Signals` member
        signal.signal(died_of, signal.SIG_DFL)
        os.kill(os.getpid(), died_of)
        return 128 + died_of
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
