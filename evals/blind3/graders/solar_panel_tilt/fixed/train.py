"""Set the tilt of each panel so its daily energy matches the demand of the building it feeds."""

import numpy as np
import warp as wp

from field import PANELS, Field


def apply_update(tilt, lr):
    """Plain gradient step on the tilts, then clear the gradient for the next iteration."""
    g = tilt.grad.numpy().copy()
    tilt.assign(tilt.numpy() - lr * g)
    tilt.grad.zero_()
    return g


def iteration(field, tilt, lr):
    tape = wp.Tape()
    with tape:
        loss = field.loss(tilt)
    tape.backward(loss)
    g = apply_update(tilt, lr)
    return float(loss.numpy()[0]), g


def initial_tilt():
    return wp.array(np.full(PANELS, 0.6, dtype=np.float32), dtype=float, requires_grad=True)


def train(iters=20, lr=0.004):
    field = Field()
    tilt = initial_tilt()
    history = []
    for it in range(iters):
        value, _ = iteration(field, tilt, lr)
        history.append(value)
        print(f"iter {it:2d}  demand gap {value:.5f}")
    return tilt, history


if __name__ == "__main__":
    t, _ = train()
    print("tilts:", np.round(t.numpy(), 3))
