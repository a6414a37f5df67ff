import numpy as np
import warp as wp


@wp.kernel
def swing(
    theta: wp.array(dtype=float),
    omega: wp.array(dtype=float),
    g_over_l: wp.array(dtype=float),
    damping: float,
    dt: float,
    theta_out: wp.array(dtype=float),
    omega_out: wp.array(dtype=float),
):
    i = wp.tid()
    alpha = -g_over_l[i] * wp.sin(theta[i]) - damping * omega[i]
    w = omega[i] + dt * alpha
    omega_out[i] = w
    theta_out[i] = theta[i] + dt * w


class PendulumBank:
    def __init__(self, lengths, damping=0.15, dt=0.01, steps=150):
        self.n = len(lengths)
        self.g_over_l = wp.array((9.81 / np.asarray(lengths)).astype(np.float32), dtype=float)
        self.damping = damping
        self.dt = dt
        self.steps = steps

    def release(self, theta0, omega0):
        theta, omega = theta0, omega0
        for _ in range(self.steps):
            th = wp.zeros(self.n, dtype=float, requires_grad=True)
            om = wp.zeros(self.n, dtype=float, requires_grad=True)
            wp.launch(swing, self.n, inputs=[theta, omega, self.g_over_l, self.damping, self.dt], outputs=[th, om])
            theta, omega = th, om
        return theta, omega
