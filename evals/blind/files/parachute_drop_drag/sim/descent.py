import numpy as np
import warp as wp

RHO_AIR = 1.2


@wp.kernel
def drag_factor(cd: wp.array(dtype=float), area: wp.array(dtype=float), mass: wp.array(dtype=float),
                rho: float, k: wp.array(dtype=float)):
    i = wp.tid()
    k[i] = 0.5 * rho * cd[i] * area[i] / mass[i]


@wp.kernel
def fall_step(
    z: wp.array(dtype=float),
    v: wp.array(dtype=float),
    k: wp.array(dtype=float),
    dt: float,
    z_out: wp.array(dtype=float),
    v_out: wp.array(dtype=float),
):
    i = wp.tid()
    vi = v[i]
    a = -9.81 - k[i] * vi * wp.abs(vi)
    vn = vi + dt * a
    v_out[i] = vn
    z_out[i] = z[i] + dt * vn


class Jumpers:
    """Skydivers under open canopies, heights measured from where each canopy opened."""

    def __init__(self, n=8, z0=0.0, dt=0.02, steps=250, seed=4):
        rng = np.random.default_rng(seed)
        self.n = n
        self.z0 = z0
        self.dt = dt
        self.steps = steps
        self.area = wp.array(rng.uniform(20.0, 28.0, n).astype(np.float32), dtype=float)
        self.mass = wp.array(rng.uniform(70.0, 100.0, n).astype(np.float32), dtype=float)
        self.k = wp.zeros(n, dtype=float, requires_grad=True)

    def set_drag(self, cd):
        wp.launch(drag_factor, self.n, inputs=[cd, self.area, self.mass, RHO_AIR], outputs=[self.k])

    def drop(self):
        z = wp.full(self.n, self.z0, dtype=float, requires_grad=True)
        v = wp.full(self.n, -30.0, dtype=float, requires_grad=True)
        for _ in range(self.steps):
            z1 = wp.zeros_like(z)
            v1 = wp.zeros_like(v)
            wp.launch(fall_step, self.n, inputs=[z, v, self.k, self.dt], outputs=[z1, v1])
            z, v = z1, v1
        return z
