"""warpgrad's own process as a child subreaper: what escapes a dead launcher comes back here and is killed.

Every run's command starts under the launcher (`reaper.py`), which kills the command's whole tree when
the command ends. Under bubblewrap a PID namespace backs it up; without bwrap (the fallback) user code
can kill the launcher itself (same user), and its processes would then be reparented to init and run on.
So this process marks itself a child subreaper (`PR_SET_CHILD_SUBREAPER`): the orphans of a dead launcher
are reparented to it instead, and `sweep` kills them when the run ends.

Which of our children are such escapees: the launcher sets `no_new_privs` on the command before it
starts it, a flag every descendant inherits and none can clear (visible as `NoNewPrivs: 1` in
/proc/PID/status). An escapee is a child of ours with the flag, outside our session (the launchers start
in their own), that is not a launcher we started (`launching` registers those; bwrap sets the flag on
itself). Where warpgrad itself already runs with the flag (a container started with no-new-privileges),
the flag tells nothing and nothing is swept: then only bwrap's PID namespace holds the tree.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import threading
from collections.abc import Iterator

from .reaper import PR_SET_CHILD_SUBREAPER, descendants

_lock = threading.Lock()
_launchers: set[int] = set()


@functools.cache
def become_subreaper() -> bool:
    """Mark this process a child subreaper (once). False where the kernel refuses (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@contextlib.contextmanager
def launching() -> Iterator[set[int]]:
    """Start a launcher inside this block and add its pid to the yielded set: no sweep runs meanwhile, so
    a launcher that just started (bwrap carries the flag) is never taken for an escapee."""
    with _lock:
        yield _launchers


def launcher_done(pid: int) -> None:
    """The launcher `pid` was waited for: it is no longer ours to spare."""
    with _lock:
        _launchers.discard(pid)


def _status_field(pid: int, name: bytes) -> bytes | None:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(name + b":"):
                    return line.split(b":", 1)[1].strip()
    except OSError:
        return None
    return None


def _children() -> list[tuple[int, int]]:
    """(pid, session id) of every child of this process."""
    me, out = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if int(fields[1]) == me:
            out.append((int(name), int(fields[3])))
    return out


def escapees() -> list[int]:
    """Children of this process that escaped a run (see the module doc)."""
    if _status_field(os.getpid(), b"NoNewPrivs") != b"0":
        return []  # we carry the flag ourselves (or cannot read it): it tells nothing
    ours = os.getsid(0)
    return [pid for pid, sid in _children()
            if sid != ours and pid not in _launchers and _status_field(pid, b"NoNewPrivs") == b"1"]


def sweep() -> int:
    """SIGKILL every escapee with its descendants and reap them; repeat until none is left. Returns how many."""
    killed = 0
    with _lock:
        for _ in range(100):  # each pass takes what the last one's deaths reparented to us
            found = escapees()
            if not found:
                break
            for pid in found:
                for p in [*descendants(pid), pid]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(p, signal.SIGKILL)
                killed += 1
            for pid in found:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
    return killed
