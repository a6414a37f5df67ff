"""Twelve solar panels on a hillside: energy collected over a day as a function of tilt."""

import numpy as np
import warp as wp

PANELS = 12
HOURS = 48  # half-hour samples


@wp.kernel
def daily_energy(
    tilt: wp.array(dtype=float),
    slope: wp.array(dtype=float),
    sun: wp.array(dtype=float),
    irradiance: wp.array(dtype=float),
    energy: wp.array(dtype=float),
):
    i, t = wp.tid()
    # incidence on the panel; the soft rectifier keeps the back side from collecting
    c = wp.cos(tilt[i] + slope[i] - sun[t])
    gain = 0.5 * (c + wp.sqrt(c * c + 0.01))
    wp.atomic_add(energy, i, irradiance[t] * gain * 0.5)


@wp.kernel
def demand_gap(energy: wp.array(dtype=float), demand: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = energy[i] - demand[i]
    wp.atomic_add(loss, 0, d * d)


class Field:
    def __init__(self):
        rng = np.random.default_rng(40)
        hours = np.linspace(5.0, 21.0, HOURS)
        self.sun = wp.array(((hours - 13.0) / 8.0 * 1.3).astype(np.float32), dtype=float)
        self.irradiance = wp.array(
            np.clip(np.sin(np.pi * (hours - 5.0) / 16.0), 0, None).astype(np.float32), dtype=float
        )
        self.slope = wp.array(rng.uniform(-0.3, 0.3, PANELS).astype(np.float32), dtype=float)
        self.demand = wp.array(rng.uniform(6.0, 9.0, PANELS).astype(np.float32), dtype=float)

    def loss(self, tilt):
        energy = wp.zeros(PANELS, dtype=float, requires_grad=True)
        wp.launch(
            daily_energy,
            (PANELS, HOURS),
            inputs=[tilt, self.slope, self.sun, self.irradiance],
            outputs=[energy],
        )
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(demand_gap, PANELS, inputs=[energy, self.demand], outputs=[loss])
        return loss
