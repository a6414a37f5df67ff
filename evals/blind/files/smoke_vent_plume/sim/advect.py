import numpy as np
import warp as wp


@wp.kernel
def emit(rate: wp.array(dtype=float), vents: wp.array(dtype=wp.int32, ndim=2), src: wp.array2d(dtype=float)):
    k = wp.tid()
    src[vents[k, 0], vents[k, 1]] = rate[k]


@wp.kernel
def upwind_step(
    c: wp.array2d(dtype=float),
    src: wp.array2d(dtype=float),
    wind: wp.vec2,
    decay: float,
    dt: float,
    dx: float,
    c_new: wp.array2d(dtype=float),
):
    i, j = wp.tid()
    ci = c[i, j]
    cw = float(0.0)
    cs = float(0.0)
    if i > 0:
        cw = c[i - 1, j]
    if j > 0:
        cs = c[i, j - 1]
    adv = wind[0] * (ci - cw) / dx + wind[1] * (ci - cs) / dx
    c_new[i, j] = ci + dt * (src[i, j] - adv - decay * ci)


class PlumeGrid:
    def __init__(self, n=16, dx=1.0, dt=0.25, steps=48, wind=(1.2, 0.7), decay=0.05):
        self.n = n
        self.dx = dx
        self.dt = dt
        self.steps = steps
        self.wind = wp.vec2(*wind)
        self.decay = decay
        self.vent_cells = np.array([[2, 3], [4, 10], [7, 5], [3, 7]], dtype=np.int32)
        self.vents = wp.array(self.vent_cells, dtype=wp.int32)

    def run(self, rate):
        src = wp.zeros((self.n, self.n), dtype=float, requires_grad=True)
        wp.launch(emit, len(self.vent_cells), inputs=[rate, self.vents], outputs=[src])
        c = wp.zeros((self.n, self.n), dtype=float, requires_grad=True)
        for _ in range(self.steps):
            c_new = wp.zeros((self.n, self.n), dtype=float, requires_grad=True)
            wp.launch(upwind_step, c.shape, inputs=[c, src, self.wind, self.decay, self.dt, self.dx], outputs=[c_new])
            c = c_new
        return c
