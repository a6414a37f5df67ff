import numpy as np
import warp as wp


@wp.kernel
def swing(
    theta: wp.array(dtype=float),
    omega: wp.array(dtype=float),
    damping: wp.array(dtype=float),
    g_over_l: wp.array(dtype=float),
    dt: float,
    theta_out: wp.array(dtype=float),
    omega_out: wp.array(dtype=float),
):
    i = wp.tid()
    w = omega[i] + dt * (-g_over_l[i] * wp.sin(theta[i]) - damping[i] * omega[i])
    omega_out[i] = w
    theta_out[i] = theta[i] + dt * w


class PendulumBank:
    """A row of independent pendulums released from different angles."""

    def __init__(self, lengths, theta0, dt=0.01, steps=150):
        self.n = len(lengths)
        self.g_over_l = wp.array((9.81 / np.asarray(lengths)).astype(np.float32), dtype=float)
        self.theta0 = np.asarray(theta0, dtype=np.float32)
        self.dt = dt
        self.steps = steps

    def run(self, damping):
        theta = wp.array(self.theta0, dtype=float, requires_grad=True)
        omega = wp.zeros(self.n, dtype=float, requires_grad=True)
        history = [theta]
        for _ in range(self.steps):
            th = wp.empty(self.n, dtype=float, requires_grad=True)
            om = wp.empty(self.n, dtype=float, requires_grad=True)
            wp.launch(swing, dim=self.n, inputs=[theta, omega, damping, self.g_over_l, self.dt], outputs=[th, om])
            theta, omega = th, om
            history.append(theta)
        return history
