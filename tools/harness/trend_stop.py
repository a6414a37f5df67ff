"""Harness listener that ends a plain run once its printed loss trajectory shows its trend.

`diagnose` reads the plain run for two things: whether the script runs, and the shape of its loss
(`warpgrad.tools.losses.summarize`: improving, flat, diverging, oscillating, non-finite). For a long
training script the shape is settled long before the last iteration, and the rest of the run is wall
time spent on nothing the report uses. The listener reads the script's own stdout line by line (the
same parser the parent uses) and ends the session at the end of the line that settles it.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from ..losses import LossPoint, parse_losses, summarize
from . import hooks
from .protocol import TrendStop

# `summarize` calls a trajectory oscillating from 4 finite points on, and judges improving/diverging by the
# last point against the first: a label read from fewer than MIN_POINTS points is a first impression. The
# trend counts as read when the label has not changed over the last HOLD points. MAX_POINTS bounds the
# reading for a trajectory that never settles (the parent keeps the last 200 points anyway).
MIN_POINTS = 10
HOLD = 5
MAX_POINTS = 100


def _label(points: list[LossPoint]) -> str:
    return str(summarize(points).get("trend", "none"))


def settled(labels: list[str]) -> bool:
    """Whether the trend labels of the growing trajectory (one per printed point) are enough to stop."""
    n = len(labels)
    if n >= MAX_POINTS:
        return True
    return n >= max(MIN_POINTS, HOLD) and len(set(labels[-HOLD:])) == 1


class _Tee:
    """sys.stdout as the script sees it: every write goes through; complete lines are fed to `on_line`."""

    def __init__(self, stream: TextIO, on_line) -> None:
        self._stream = stream
        self._on_line = on_line
        self._partial = ""

    def write(self, text: str) -> int:
        n = self._stream.write(text)
        self._partial += text
        if "\n" in self._partial:
            *lines, self._partial = self._partial.split("\n")
            for line in lines:
                self._on_line(line)
        return n

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class TrendStopListener(hooks.Listener):
    key = "trend_stop"

    def __init__(self, session) -> None:
        self.s = session
        self.lines: list[str] = []
        self.points: list[LossPoint] = []
        self.labels: list[str] = []
        self.stopped = False

    def start(self) -> None:
        sys.stdout = _Tee(sys.stdout, self._line)

    def _line(self, line: str) -> None:
        if self.stopped or not parse_losses(line):
            return
        # Parsed with the loss lines before it, so a line without an iteration word is numbered by its position,
        # as the parent numbers it in the whole output.
        self.lines.append(line)
        self.points = parse_losses("\n".join(self.lines))
        self.labels.append(_label(self.points))
        if settled(self.labels):
            self.stopped = True
            self.s.finish("completed")

    def result(self) -> TrendStop:
        last = self.points[-1] if self.points else None
        return TrendStop(stopped=self.stopped, points=len(self.points),
                         iteration=last.iteration if last is not None else None,
                         trend=self.labels[-1] if self.labels else None)

