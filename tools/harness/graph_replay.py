"""Follow a captured graph's replays as if the script ran its launches eagerly.

Under `wp.ScopedCapture` (CUDA, and on the CPU since Warp 1.19, where APIC records the operations) launches
are recorded but do not run; `wp.capture_launch` later runs them again and again over the same buffers with
no Python call. So what the hooks see while a graph is recorded is not what executes, and at a replay they
see nothing. Yet a replay is an ordinary evaluation of the recorded program: a parameter's storage
perturbed before it is read by the replayed launches, and the objective read after, is a valid FD
evaluation; the tape recorded during capture is the replay's tape.

So the hooks hold back every event of a recording (`Recording`), and at each replay of that graph deliver
them to the listeners around the real replay, in the order an eager run would:

1. the events before the recorded `tape.backward`, forward launches and copies: a listener may perturb a
   parameter at its first use here, before the replay reads it;
2. the replay itself (Warp's own `capture_launch`): the forward and the backward run;
3. `before_backward`, with the tape arrays' gradients put back to their values before the replay, so a
   listener sees the state an eager backward would start from (objective computed, gradients not yet
   accumulated); then the replay's gradients are restored and `after_backward` follows.

Declined, with the reason given to the listeners as a graph event (the FD check then refuses with it):
a graph that records launches or copies after its backward, or more than one backward (an update or a
second pass inside the graph: the listeners would see it before or after it really ran), and a graph
that was not recorded while the hooks were installed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import warp as wp

from . import warp_compat

_WORK = ("before_launch", "after_launch", "before_copy", "after_copy")


@dataclass
class Recording:
    """The events the listeners would have seen had the recorded launches run when recorded."""

    events: list[tuple[str, tuple]] = field(default_factory=list)

    def decline(self) -> str | None:
        """Why these events cannot be delivered around a replay; None when they can."""
        names = [n for n, _ in self.events]
        n_bwd = names.count("before_backward")
        if n_bwd > 1:
            return (f"a replayed graph records {n_bwd} tape.backward calls: the listeners cannot see the work "
                    "between them happen in order")
        if n_bwd == 1:
            after = names[names.index("after_backward") + 1:] if "after_backward" in names else []
            if any(n in _WORK for n in after):
                return ("a replayed graph records launches or copies after its tape.backward (an update inside "
                        "the graph): the listeners cannot see them happen in order")
        return None


def _arrays(tape, loss, grads) -> list:
    seen: dict[int, Any] = {}
    for e in warp_compat.tape_records(tape):
        rec = warp_compat.kernel_record(e)
        values = [*rec.inputs, *rec.outputs] if rec is not None else list(warp_compat.record_closure(e).values())
        for v in values:
            if isinstance(v, wp.array) and v.grad is not None:
                seen.setdefault(id(v), v)
    for a in [loss, *(grads or {})]:
        if isinstance(a, wp.array) and a.grad is not None:
            seen.setdefault(id(a), a)
    return list(seen.values())


def replay(rec: Recording, run_graph: Callable[[], Any], emit: Callable[..., None],
           numpy: Callable[[Any], np.ndarray]) -> Any:
    """Deliver `rec`'s events around `run_graph()` (Warp's replay) as described in the module docstring."""
    names = [n for n, _ in rec.events]
    if "before_backward" not in names:
        for name, args in rec.events:  # a forward-only graph: its events, then the replay
            emit(name, *args)
        return run_graph()
    b = names.index("before_backward")
    a = names.index("after_backward") if "after_backward" in names else len(names)
    for name, args in rec.events[:b]:
        emit(name, *args)
    tape, loss, grads = rec.events[b][1]
    arrays = _arrays(tape, loss, grads)
    before = [numpy(x.grad).copy() for x in arrays]
    result = run_graph()
    after = [numpy(x.grad).copy() for x in arrays]
    for x, g in zip(arrays, before):
        x.grad.assign(g)
    emit("before_backward", tape, loss, grads)
    for x, g in zip(arrays, after):
        x.grad.assign(g)
    for name, args in rec.events[b + 1:a + 1]:
        emit(name, *args)
    for name, args in rec.events[a + 1:]:
        emit(name, *args)
    return result
