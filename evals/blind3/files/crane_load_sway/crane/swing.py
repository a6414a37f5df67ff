"""Eight gantry cranes, each with a load swinging on its cable; a damping gain per crane."""

import numpy as np
import warp as wp


@wp.kernel
def swing_step(
    theta: wp.array(dtype=float),
    omega: wp.array(dtype=float),
    gain: wp.array(dtype=float),
    g_over_l: wp.array(dtype=float),
    dt: float,
    theta_out: wp.array(dtype=float),
    omega_out: wp.array(dtype=float),
):
    i = wp.tid()
    alpha = -g_over_l[i] * wp.sin(theta[i]) - gain[i] * omega[i] * (1.0 + 0.5 * theta[i] * theta[i])
    w = omega[i] + dt * alpha
    omega_out[i] = w
    theta_out[i] = theta[i] + dt * w


@wp.kernel
def residual_swing(theta: wp.array(dtype=float), omega: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, theta[i] * theta[i] + 0.1 * omega[i] * omega[i])


class CraneYard:
    def __init__(self, n=8, steps=160, segment=40, dt=0.02):
        rng = np.random.default_rng(31)
        self.n, self.steps, self.segment, self.dt = n, steps, segment, dt
        self.g_over_l = wp.array((9.81 / rng.uniform(2.0, 6.0, n)).astype(np.float32), dtype=float)
        self.theta0 = rng.uniform(0.2, 0.5, n).astype(np.float32)
        self.omega0 = np.zeros(n, dtype=np.float32)

    def advance(self, theta, omega, gain, steps):
        """Run `steps` steps from (theta, omega); returns the end state (new arrays)."""
        for _ in range(steps):
            th = wp.zeros(self.n, dtype=float, requires_grad=True)
            om = wp.zeros(self.n, dtype=float, requires_grad=True)
            wp.launch(
                swing_step, self.n, inputs=[theta, omega, gain, self.g_over_l, self.dt], outputs=[th, om]
            )
            theta, omega = th, om
        return theta, omega

    def swing_loss(self, theta, omega):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(residual_swing, self.n, inputs=[theta, omega], outputs=[loss])
        return loss
