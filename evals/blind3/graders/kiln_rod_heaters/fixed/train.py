"""Fit the 16 heater band powers so the rod reaches its firing profile after 7.5 s."""

import numpy as np
import warp as wp

from rod import BANDS, CELLS, Rod

LR = 0.5


def initial_power():
    return wp.array(np.full(BANDS, 2.0, dtype=np.float32), dtype=float, requires_grad=True)


def mse_and_grad(rod, power):
    tape = wp.Tape()
    with tape:
        total = rod.fire(power)
    mse = float(total.numpy()[0]) / CELLS
    # seed d(mse)/d(total) = 1 / CELLS
    seed = wp.array([1.0 / CELLS], dtype=float)
    tape.backward(grads={total: seed})
    g = power.grad.numpy().copy()
    tape.zero()
    return mse, g


def main():
    rod = Rod()
    power = initial_power()
    for it in range(12):
        mse, g = mse_and_grad(rod, power)
        print(f"iter {it:2d}  profile mse {mse:9.4f} K^2")
        power.assign(power.numpy() - LR * g)
    print("band power:", np.round(power.numpy(), 3))


if __name__ == "__main__":
    main()
