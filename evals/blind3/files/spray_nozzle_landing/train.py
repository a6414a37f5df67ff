"""Tune the exit speed of each of 24 nozzles so the droplets land on their seed bed."""

import numpy as np
import warp as wp

from spray import N_DROPS, SprayBar


def initial_speed():
    rng = np.random.default_rng(4)
    return wp.array(rng.uniform(3.0, 5.0, N_DROPS).astype(np.float32), dtype=float, requires_grad=True)


def loss_and_grad(bar, speed):
    tape = wp.Tape()
    with tape:
        loss = bar.forward(speed)
    tape.backward(loss)
    g = speed.grad.numpy().copy()
    tape.zero()
    return float(loss.numpy()[0]), g, int(bar.count.numpy()[0])


def main():
    bar = SprayBar()
    speed = initial_speed()
    for it in range(20):
        loss, g, landed = loss_and_grad(bar, speed)
        print(f"iter {it:2d}  loss {loss:.5f}  landed {landed}/{N_DROPS}")
        speed.assign(speed.numpy() - 0.05 * g)
    print("speeds:", np.round(speed.numpy(), 3))


if __name__ == "__main__":
    main()
