"""A ceramic rod in a kiln: explicit 1-D heat conduction with 16 heater bands and 48 cells."""

import numpy as np
import warp as wp

CELLS = 48
BANDS = 16


@wp.kernel
def conduct(
    temp: wp.array(dtype=float),
    power: wp.array(dtype=float),
    alpha: float,
    loss_coeff: float,
    dt: float,
    out: wp.array(dtype=float),
):
    i = wp.tid()
    left = temp[wp.max(i - 1, 0)]
    right = temp[wp.min(i + 1, CELLS - 1)]
    lap = left - 2.0 * temp[i] + right
    heat = power[i // 3]
    out[i] = temp[i] + dt * (alpha * lap + heat - loss_coeff * temp[i])


@wp.kernel
def squared_error(temp: wp.array(dtype=float), target: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    d = temp[i] - target[i]
    wp.atomic_add(total, 0, d * d)


class Rod:
    def __init__(self, steps=150, dt=0.05):
        self.steps, self.dt = steps, dt
        self.alpha, self.loss_coeff = 2.0, 0.08
        x = np.linspace(0.0, 1.0, CELLS)
        # firing profile: hotter in the middle of the rod
        self.target = wp.array((20.0 + 30.0 * np.sin(np.pi * x) ** 2).astype(np.float32), dtype=float)

    def fire(self, power):
        temps = [wp.zeros(CELLS, dtype=float, requires_grad=True)]
        for _ in range(self.steps):
            nxt = wp.zeros(CELLS, dtype=float, requires_grad=True)
            wp.launch(
                conduct, CELLS, inputs=[temps[-1], power, self.alpha, self.loss_coeff, self.dt], outputs=[nxt]
            )
            temps.append(nxt)
        total = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(squared_error, CELLS, inputs=[temps[-1], self.target], outputs=[total])
        return total
