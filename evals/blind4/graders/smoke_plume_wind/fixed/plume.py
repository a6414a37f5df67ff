"""A 2-D smoke plume: a source near the floor, buoyant rise, and a per-row cross wind.

Semi-Lagrangian advection of the density on a 20 x 20 grid (bilinear back-tracing)."""

import numpy as np
import warp as wp

NX = 20
NY = 20
STEPS = 30
DT = 0.1
RISE = 1.6


@wp.func
def sample(d: wp.array2d(dtype=float), x: float, y: float):
    x = wp.clamp(x, 0.0, float(NX) - 1.001)
    y = wp.clamp(y, 0.0, float(NY) - 1.001)
    i = int(wp.floor(x))
    j = int(wp.floor(y))
    fx = x - float(i)
    fy = y - float(j)
    a = (1.0 - fx) * d[i, j] + fx * d[i + 1, j]
    b = (1.0 - fx) * d[i, j + 1] + fx * d[i + 1, j + 1]
    return (1.0 - fy) * a + fy * b


@wp.kernel
def advect(d_in: wp.array2d(dtype=float), wind: wp.array(dtype=float), rise: float, dt: float,
           d_out: wp.array2d(dtype=float)):
    i, j = wp.tid()
    x = float(i) - dt * wind[j]
    y = float(j) - dt * rise
    s = sample(d_in, x, y)
    if j == 1 and i >= 4 and i <= 6:
        s = s + dt * 2.0
    d_out[i, j] = 0.995 * s


@wp.kernel
def misfit(d: wp.array2d(dtype=float), target: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
    i, j = wp.tid()
    r = d[i, j] - target[i, j]
    wp.atomic_add(loss, 0, r * r)


class Plume:
    def __init__(self):
        # the observed plume: the same model under the gust profile measured on the day
        observed_wind = 2.0 + 1.5 * np.sin(np.linspace(0.0, 3.0, NY))
        self.target = wp.clone(self.simulate(wp.array(observed_wind, dtype=float)))

    def simulate(self, wind):
        """Density after STEPS advection steps, recorded on the active tape."""
        d = wp.zeros((NX, NY), dtype=float, requires_grad=True)
        for _ in range(STEPS):
            d_next = wp.zeros((NX, NY), dtype=float, requires_grad=True)
            wp.launch(advect, dim=(NX, NY), inputs=[d, wind, RISE, DT], outputs=[d_next])
            d = d_next
        return d

    def loss(self, wind):
        d = self.simulate(wind)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(misfit, dim=(NX, NY), inputs=[d, self.target], outputs=[loss])
        return loss
