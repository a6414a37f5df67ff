import numpy as np
import warp as wp


@wp.func
def friction_drag(v: float, coeffs: wp.vec3, mu_g: float):
    c = coeffs
    c[1] = wp.max(c[1], 0.01)
    c[1] = c[1] * c[1]
    coulomb = mu_g * v / wp.sqrt(v * v + c[1])
    return coulomb + c[2] * v * wp.abs(v)


@wp.kernel
def advance(
    coeffs: wp.array(dtype=wp.vec3),
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    mu_g: float,
    dt: float,
    x_out: wp.array(dtype=float),
    v_out: wp.array(dtype=float),
):
    i = wp.tid()
    vn = v[i] - dt * friction_drag(v[i], coeffs[i], mu_g)
    v_out[i] = vn
    x_out[i] = x[i] + dt * vn


@wp.kernel
def set_entry_speed(coeffs: wp.array(dtype=wp.vec3), v: wp.array(dtype=float)):
    i = wp.tid()
    v[i] = coeffs[i][0]


class Runout:
    """Flat snow runout after the sled track: Coulomb friction smoothed near rest plus air drag."""

    def __init__(self, n=5, mu=0.25, dt=0.01, steps=700):
        self.n = n
        self.mu_g = mu * 9.81
        self.dt = dt
        self.steps = steps

    def slide(self, coeffs):
        x = wp.zeros(self.n, dtype=float, requires_grad=True)
        v = wp.zeros(self.n, dtype=float, requires_grad=True)
        wp.launch(set_entry_speed, self.n, inputs=[coeffs], outputs=[v])
        for _ in range(self.steps):
            x1 = wp.empty_like(x)
            v1 = wp.empty_like(v)
            wp.launch(advance, self.n, inputs=[coeffs, x, v, self.mu_g, self.dt], outputs=[x1, v1])
            x, v = x1, v1
        return x
