"""Eight independent rotor blades spinning up under a gust: aero torque depends on pitch."""

import numpy as np
import warp as wp


@wp.kernel
def spin_step(
    pitch: wp.array(dtype=float),
    omega_in: wp.array(dtype=float),
    wind: float,
    dt: float,
    omega_out: wp.array(dtype=float),
):
    i = wp.tid()
    p = pitch[i]
    w = omega_in[i]
    # lift-like torque, peaks near 45 degrees of pitch; quadratic aero drag on the blade speed
    torque = 0.8 * wind * wind * wp.sin(2.0 * p) - 0.05 * w * wp.abs(w) - 0.3 * w
    omega_out[i] = w + dt * torque


@wp.kernel
def speed_error(
    omega: wp.array(dtype=float),
    target: wp.array(dtype=float),
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    d = omega[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


class RotorModel:
    def __init__(self, n_blades=8, steps=40, dt=0.02):
        self.n = n_blades
        self.steps = steps
        self.dt = dt
        rng = np.random.default_rng(3)
        self.target = wp.array(rng.uniform(6.0, 9.0, n_blades).astype(np.float32), dtype=float)

    def frame(self, pitch, wind):
        """Spin every blade up from rest under one gust; returns the speed-error array."""
        omega = [wp.zeros(self.n, dtype=float, requires_grad=True) for _ in range(self.steps + 1)]
        for t in range(self.steps):
            wp.launch(spin_step, self.n, inputs=[pitch, omega[t], wind, self.dt], outputs=[omega[t + 1]])
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(speed_error, self.n, inputs=[omega[-1], self.target], outputs=[loss])
        return loss
