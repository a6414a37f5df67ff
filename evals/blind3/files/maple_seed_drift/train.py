"""Fit the drag coefficient of each of ten maple seeds to where it was seen 1.2 s after release."""

import numpy as np
import warp as wp
import warp.optim

from aero.flight import Drop


def make_drag(n):
    return wp.array(np.full(n, 0.8, dtype=np.float32), dtype=float, requires_grad=True)


def train(iters=15, lr=0.002):
    drop = Drop()
    drag = make_drag(drop.n)
    opt = wp.optim.SGD([drag], lr=lr)
    for it in range(iters):
        tape = wp.Tape()
        with tape:
            loss = drop.run(drag)
        tape.backward(loss)
        print(f"iter {it:2d}  landing error {loss.numpy()[0]:.5f}")
        opt.step([drag.grad])
        tape.zero()
    return drag


if __name__ == "__main__":
    d = train()
    print("drag:", np.round(d.numpy(), 3))
