"""`RunListener`: what a plain run did with Warp (mode "run"), counted and nothing else."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import hooks
from ..protocol import RunCounts

if TYPE_CHECKING:
    from ..main import Session


class RunListener(hooks.Listener):
    """Counts what a plain run did with Warp (launches, tapes, backward calls, updates)."""

    key = "run"

    def __init__(self, session: Session) -> None:
        self.s = session
        self.launches = 0
        self.taped_launches = 0
        self.tapes = 0
        self.backward_calls = 0
        self.optimizer_steps = 0

    def before_launch(self, call: hooks.LaunchCall) -> None:
        self.launches += 1
        self.taped_launches += call.taped

    def tape_enter(self, tape) -> None:
        self.tapes += 1

    def before_backward(self, tape, loss, grads) -> None:
        self.backward_calls += 1

    def optimizer_step(self, opt, grads) -> None:
        self.optimizer_steps += 1

    def result(self) -> RunCounts:
        return RunCounts(launches=self.launches, taped_launches=self.taped_launches, tapes=self.tapes,
                         backward_calls=self.backward_calls, optimizer_steps=self.optimizer_steps)
