"""The hail rollout: ten stones thrown onto the roof, 0.8 s of flight and bouncing."""

import numpy as np
import warp as wp

from .roof import hail_step, squared_miss

STONES = 10
STEPS = 160
DT = 0.005


class HailSim:
    def __init__(self):
        xs = np.linspace(-1.0, 1.0, STONES)
        self.x0 = wp.array(np.stack([xs, np.tan(np.radians(30.0)) * xs + 0.6], 1), dtype=wp.vec2)
        self.gutter = wp.array(np.stack([xs + 1.2, np.tan(np.radians(30.0)) * (xs + 1.2) + 0.15], 1),
                               dtype=wp.vec2)

    def rollout(self, v0):
        x, v = self.x0, v0
        for _ in range(STEPS):
            x_next = wp.empty(STONES, dtype=wp.vec2, requires_grad=True)
            v_next = wp.empty(STONES, dtype=wp.vec2, requires_grad=True)
            wp.launch(hail_step, dim=STONES, inputs=[x, v, DT], outputs=[x_next, v_next])
            x, v = x_next, v_next
        return x

    def miss(self, x):
        total = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(squared_miss, dim=STONES, inputs=[x, self.gutter], outputs=[total])
        return total
