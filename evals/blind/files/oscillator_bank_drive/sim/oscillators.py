import numpy as np
import warp as wp


@wp.kernel
def step_bank(
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    omega: wp.array(dtype=float),
    damping: wp.array(dtype=float),
    amp: wp.array(dtype=float),
    t: float,
    dt: float,
    x_out: wp.array(dtype=float),
    v_out: wp.array(dtype=float),
):
    i = wp.tid()
    w = omega[i]
    drive = amp[i] * wp.sin(1.3 * w * t)
    acc = drive - w * w * x[i] - damping[i] * v[i]
    vn = v[i] + dt * acc
    v_out[i] = vn
    x_out[i] = x[i] + dt * vn


class OscillatorBank:
    def __init__(self, n=8, dt=0.01, steps=150, seed=0):
        rng = np.random.default_rng(seed)
        self.n = n
        self.dt = dt
        self.steps = steps
        self.omega = wp.array(rng.uniform(2.0, 5.0, n).astype(np.float32), dtype=float)

    def simulate(self, damping, amp):
        x = wp.zeros(self.n, dtype=float, requires_grad=True)
        v = wp.zeros(self.n, dtype=float, requires_grad=True)
        for s in range(self.steps):
            x_out = wp.zeros(self.n, dtype=float, requires_grad=True)
            v_out = wp.zeros(self.n, dtype=float, requires_grad=True)
            wp.launch(
                step_bank,
                self.n,
                inputs=[x, v, self.omega, damping, amp, s * self.dt, self.dt],
                outputs=[x_out, v_out],
            )
            x, v = x_out, v_out
        return x
