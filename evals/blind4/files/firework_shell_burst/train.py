"""Aim eight firework shells: optimize their launch velocities so each bursts at its point at t = 1.2 s."""

import numpy as np
import warp as wp

from shells import N, Shells


@wp.kernel
def sgd(v: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    v[i] = v[i] - lr * g[i]


def initial_velocities():
    return wp.array(np.tile([0.0, 14.0, 0.0], (N, 1)), dtype=wp.vec3, requires_grad=True)


def train_step(shells, v0, lr):
    tape = wp.Tape()
    tape.zero()
    with tape:
        loss = shells.miss(v0)
    tape.backward(loss)
    wp.launch(sgd, dim=N, inputs=[v0, v0.grad, lr])
    return loss.numpy()[0]


def main(iters=25, lr=0.004):
    shells = Shells()
    v0 = initial_velocities()
    for it in range(iters):
        miss = train_step(shells, v0, lr)
        print(f"iter {it:2d}  burst miss {miss:.4f}")
    print("launch velocities:\n", np.round(v0.numpy(), 2))


if __name__ == "__main__":
    main()
