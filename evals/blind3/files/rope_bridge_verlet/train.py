"""Find the plank placement that, released at rest, settles onto the surveyed bridge shape."""

import numpy as np
import warp as wp

import sim


def loss_and_grad(x0, target):
    tape = wp.Tape()
    with tape:
        loss = sim.simulate(x0, target)
    tape.backward(loss)
    g = x0.grad.numpy().copy()
    tape.zero()
    return float(loss.numpy()[0]), g


def main():
    target = sim.surveyed_shape()
    x0 = wp.array(sim.straight_deck(), dtype=wp.vec3d, requires_grad=True)
    for it in range(25):
        loss, g = loss_and_grad(x0, target)
        if it % 4 == 0:
            print(f"iter {it:2d}  shape error {loss:.6e}")
        x0.assign(x0.numpy() - 0.02 * g)
    print("final error", loss_and_grad(x0, target)[0])


if __name__ == "__main__":
    main()
