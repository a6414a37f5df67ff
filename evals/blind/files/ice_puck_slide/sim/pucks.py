import numpy as np
import warp as wp

G = 9.81


@wp.kernel
def slide(
    shots: wp.array(dtype=wp.vec3),
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    dt: float,
    x_out: wp.array(dtype=float),
    v_out: wp.array(dtype=float),
):
    i = wp.tid()
    # shot = (launch speed [m/s], friction smoothing speed [m/s], kinetic friction coefficient)
    shot = shots[i]
    s = shot[1]
    mu = shot[2]
    vi = v[i]
    decel = mu * 9.81 * vi / wp.sqrt(vi * vi + s * s)
    vn = vi - dt * decel
    v_out[i] = vn
    x_out[i] = x[i] + dt * vn


@wp.kernel
def launch_speed(shots: wp.array(dtype=wp.vec3), v: wp.array(dtype=float)):
    i = wp.tid()
    v[i] = shots[i][0]


class PuckRink:
    def __init__(self, n=6, dt=0.01, steps=700):
        self.n = n
        self.dt = dt
        self.steps = steps

    def run(self, shots):
        x = wp.zeros(self.n, dtype=float, requires_grad=True)
        v = wp.zeros(self.n, dtype=float, requires_grad=True)
        wp.launch(launch_speed, self.n, inputs=[shots], outputs=[v])
        for _ in range(self.steps):
            x_out = wp.zeros(self.n, dtype=float, requires_grad=True)
            v_out = wp.zeros(self.n, dtype=float, requires_grad=True)
            wp.launch(slide, self.n, inputs=[shots, x, v, self.dt], outputs=[x_out, v_out])
            x, v = x_out, v_out
        return x
