"""Tune the anti-sway damping gain of each crane so the loads are still after 3.2 s.

The full tape does not fit on the yard controller, so the gradient is checkpointed
(crane/checkpoint.py): four segments of 40 steps, recomputed one at a time.
"""

import numpy as np
import warp as wp

from crane.checkpoint import loss_and_grad
from crane.swing import CraneYard


def initial_gain(n):
    return wp.array(np.full(n, 0.3, dtype=np.float32), dtype=float, requires_grad=True)


def main():
    yard = CraneYard()
    gain = initial_gain(yard.n)
    for it in range(15):
        loss, g = loss_and_grad(yard, gain)
        print(f"iter {it:2d}  residual swing {loss:.6f}")
        gain.assign(np.maximum(gain.numpy() - 2.0 * g, 0.0))
    print("gains:", np.round(gain.numpy(), 3))


if __name__ == "__main__":
    main()
