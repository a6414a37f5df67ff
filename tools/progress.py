"""What long work is doing and how far along it is, for a terminal (`diagnose`, `gradcheck`).

The tools call `say(...)` at each step; nothing is shown unless the CLI installed a sink with `reporting(...)`,
which it does only on a terminal and without `--json` (CI logs and pipes stay quiet, JSON stays parseable).
One sink per process (a CLI command runs one tool; the stages of `diagnose` run in worker threads, which a
context variable would not reach). The MCP server never installs one: without a sink, `say` does nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

Sink = Callable[[str], None]

_SINK: list[Sink | None] = [None]
# The stage a multi-stage tool is in ("overwrite tracker"): later messages are shown under it. The last stage
# started wins, as on the one status line a terminal shows.
_STAGE: list[str | None] = [None]


@contextlib.contextmanager
def reporting(sink: Sink | None) -> Iterator[None]:
    """Send `say(...)` messages to `sink` inside the block (None: keep quiet)."""
    previous, _SINK[0] = _SINK[0], sink
    try:
        yield
    finally:
        _SINK[0], _STAGE[0] = previous, None


def say(message: str) -> None:
    sink = _SINK[0]
    if sink is not None:
        sink(message if _STAGE[0] is None else f"{_STAGE[0]}: {message}")


def stage(label: str) -> None:
    """A tool entered a stage: show '<label>...', then its messages as '<label>: <message>'."""
    _STAGE[0] = None
    say(f"{label}...")
    _STAGE[0] = label


def fd_evaluations(iteration: int, done: int, planned: int, running: int = 0) -> None:
    """'FD at iteration 1: 6/11 evaluations (4 running)'. The plan can grow (a disagreement's follow-ups)."""
    total = max(planned, done + running)
    say(f"FD at iteration {iteration}: {done}/{total} evaluations" + (f" ({running} running)" if running else ""))
