import numpy as np
import warp as wp

from .dynamics import State


class SegmentedRollout:
    """Stores the state at every segment boundary; the backward re-runs one segment at a time."""

    def __init__(self, system, segments=4, steps=12):
        self.system = system
        self.segments = segments
        self.steps = steps
        self.boundaries = []

    def _segment(self, start, thrust):
        states = [start]
        for _ in range(self.steps):
            s = State(self.system.n)
            self.system.step(states[-1], s, thrust)
            states.append(s)
        return states

    def _restore(self, k):
        q, qd = self.boundaries[k]
        s = State(self.system.n)
        s.q.assign(q)
        s.qd.assign(qd)
        return s

    def forward(self, q0, qd0, thrust):
        self.boundaries = [(q0.copy(), qd0.copy())]
        s = State(self.system.n)
        s.q.assign(q0)
        s.qd.assign(qd0)
        for k in range(self.segments):
            s = self._segment(s, thrust)[-1]
            self.boundaries.append((s.q.numpy().copy(), s.qd.numpy().copy()))
        return s

    def backward(self, thrust, loss_fn):
        total = np.zeros((self.system.n, 2), dtype=np.float32)
        adj_q = adj_qd = None
        value = 0.0
        for k in reversed(range(self.segments)):
            start = self._restore(k)
            tape = wp.Tape()
            with tape:
                states = self._segment(start, thrust)
                if k == self.segments - 1:
                    loss = loss_fn(states[-1])
            if k == self.segments - 1:
                tape.backward(loss)
                value = float(loss.numpy()[0])
            else:
                end = states[-1]
                end.q.grad.assign(adj_q)
                tape.backward()
            adj_q = start.q.grad.numpy().copy()
            adj_qd = start.qd.grad.numpy().copy()
            total += thrust.grad.numpy()
            tape.zero()
        return value, total
