"""Temporary rewritten copies of a user's script, written beside it and removed on every exit path.

`bisect` runs the script with its step-count knob changed. The copy must sit in the script's own folder
(its imports and `__file__`-relative data resolve there), which is the user's folder: a copy left behind
is litter the user finds later and may even import. A `finally` is not enough, since a SIGKILL of this
process (a cancelled MCP call, an OOM kill, a CI timeout) skips it. So each set of copies is guarded
three ways:

* removed as soon as its run ends (the normal path);
* a watchdog process, started in its own session so a signal to our process group does not reach it,
  blocks on a pipe only we hold open; when we exit for any reason, SIGKILL included, the kernel closes the
  pipe and the watchdog removes every copy of ours still there;
* copies are named with the owning process id (`_warpgrad_horizon_<pid>_...`): the next `bisect` in the
  folder removes those whose owner is no longer alive (the watchdog itself killed, a machine reboot).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PREFIX = "_warpgrad_horizon_"
_OURS = re.compile(re.escape(PREFIX) + r"(\d+)_")

# Runs with -I -S: no site, no warpgrad import, starts in milliseconds. Reads stdin to EOF (our death or
# our close), then removes the files named with our prefix.
_WATCHDOG = (
    "import os,sys\n"
    "sys.stdin.buffer.read()\n"
    "d,p=sys.argv[1],sys.argv[2]\n"
    "for f in os.listdir(d):\n"
    "    if f.startswith(p):\n"
    "        try: os.unlink(os.path.join(d,f))\n"
    "        except OSError: pass\n"
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def sweep_stale(folder: Path) -> list[str]:
    """Remove copies whose owning process is gone; returns their names."""
    removed = []
    for p in folder.iterdir():
        m = _OURS.match(p.name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))) and p.is_file():
            p.unlink(missing_ok=True)
            removed.append(p.name)
    return removed


class ScriptCopies:
    """Copies of `script` beside it, all removed when the context exits or this process dies."""

    def __init__(self, script: Path) -> None:
        self.script = script
        self.prefix = f"{PREFIX}{os.getpid()}_"
        self._watchdog: subprocess.Popen | None = None

    def __enter__(self) -> ScriptCopies:
        sweep_stale(self.script.parent)
        self._watchdog = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(self.script.parent), self.prefix],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        return self

    def path(self, tag: str) -> Path:
        return self.script.with_name(f"{self.prefix}{tag}_{self.script.name}")

    def write(self, tag: str, source: str) -> Path:
        p = self.path(tag)
        p.write_text(source, encoding="utf-8")
        return p

    def __exit__(self, *exc: object) -> None:
        for p in self.script.parent.glob(f"{self.prefix}*"):
            p.unlink(missing_ok=True)
        if self._watchdog is not None:
            assert self._watchdog.stdin is not None
            self._watchdog.stdin.close()  # EOF: the watchdog finds nothing left and exits
            self._watchdog.wait(timeout=10)
