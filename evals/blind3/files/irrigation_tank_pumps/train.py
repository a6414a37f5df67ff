"""Plan pump rates that bring every tank to its target level in 8 s, with an energy penalty.

The pump rates live in numpy; each iteration uploads them, differentiates the tank misfit with
Warp, adds the energy penalty on the host and takes a plain gradient step.
"""

import numpy as np
import warp as wp

from hydro import TankChain

ENERGY_WEIGHT = 0.02


def objective_and_grad(chain, pump_np):
    pump = wp.array(pump_np, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        misfit = chain.misfit(pump)
    tape.backward(misfit)
    energy = ENERGY_WEIGHT * float(np.sum(pump_np.astype(np.float64) ** 2))
    total = float(misfit.numpy()[0]) + energy
    grad = pump.grad.numpy() + 2.0 * ENERGY_WEIGHT * pump_np
    return total, grad


def main(iters=20, lr=0.05):
    chain = TankChain()
    pump_np = np.full(chain.n, 0.1, dtype=np.float32)
    for it in range(iters):
        total, g = objective_and_grad(chain, pump_np)
        print(f"iter {it:2d}  objective {total:.5f}")
        pump_np = (pump_np - lr * g).astype(np.float32)
    print("pump rates:", np.round(pump_np, 3))


if __name__ == "__main__":
    main()
