"""Reconstruct the throw velocities of ten test hailstones from where they ended up on the roof
(the gutter marks). Objective: half the summed squared miss."""

import numpy as np
import warp as wp

from hail import STONES, HailSim


@wp.kernel
def descend(v: wp.array(dtype=wp.vec2), g: wp.array(dtype=wp.vec2), lr: float):
    i = wp.tid()
    v[i] = v[i] - lr * g[i]


class Fit:
    def __init__(self, lr=0.4):
        self.sim = HailSim()
        self.v0 = wp.array(np.tile([1.0, 0.0], (STONES, 1)), dtype=wp.vec2, requires_grad=True)
        self.lr = lr
        self.tape = wp.Tape()
        self.last_positions = None

    def step(self):
        self.tape.reset()
        with self.tape:
            x_end = self.sim.rollout(self.v0)
            total = self.sim.miss(x_end)
        objective = 0.5 * float(total.numpy()[0])
        # d(objective)/d(total) = 0.5
        self.tape.backward(grads={total: wp.array([0.5], dtype=float)})
        wp.launch(descend, dim=STONES, inputs=[self.v0, self.v0.grad, self.lr])
        self.last_positions = wp.clone(x_end, requires_grad=False)
        return objective


def main(iters=25):
    fit = Fit()
    for it in range(iters):
        objective = fit.step()
        print(f"iter {it:2d}  objective {objective:.5f}")
    print("throw velocities:\n", np.round(fit.v0.numpy(), 3))


if __name__ == "__main__":
    main()
