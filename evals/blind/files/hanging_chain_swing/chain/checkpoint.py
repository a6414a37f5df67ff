import numpy as np
import warp as wp

from .model import ChainState


class CheckpointedRollout:
    """Rollout that keeps only the segment start states and recomputes each segment for the backward."""

    def __init__(self, model, num_segments, steps_per_segment):
        self.model = model
        self.num_segments = num_segments
        self.steps_per_segment = steps_per_segment
        self.saved = []

    def run_segment(self, start, wind):
        states = [start]
        for _ in range(self.steps_per_segment):
            nxt = ChainState(self.model.n)
            self.model.step(states[-1], nxt, wind)
            states.append(nxt)
        return states

    def forward(self, q0, qd0, wind):
        self.saved = []
        q, qd = q0, qd0
        for _ in range(self.num_segments):
            self.saved.append((q.copy(), qd.copy()))
            states = self.run_segment(ChainState(self.model.n, q, qd), wind)
            q = states[-1].q.numpy()
            qd = states[-1].qd.numpy()
        return q, qd

    def backward(self, wind, loss_fn):
        """Re-tape the segments last to first; return (loss, d loss / d wind)."""
        grad_wind = np.zeros((self.model.n, 3))
        adj_q = adj_qd = None
        loss_value = None
        for seg in reversed(range(self.num_segments)):
            q, qd = self.saved[seg]
            start = ChainState(self.model.n, q, qd)
            tape = wp.Tape()
            with tape:
                states = self.run_segment(start, wind)
                if seg == self.num_segments - 1:
                    loss = loss_fn(states[-1])
            if seg == self.num_segments - 1:
                loss_value = float(loss.numpy()[0])
                tape.backward(loss)
            else:
                tape.backward(grads={states[-1].q: adj_q, states[-1].qd: adj_qd})
            adj_q = wp.clone(start.q.grad)
            adj_qd = wp.clone(start.qd.grad)
            grad_wind += wind.grad.numpy()
            tape.zero()
        return loss_value, grad_wind
