import numpy as np
import warp as wp


@wp.kernel
def sink(
    depth: wp.array(dtype=float),
    vel: wp.array(dtype=float),
    drag: wp.array(dtype=float),
    g_eff: float,
    dt: float,
    depth_out: wp.array(dtype=float),
    vel_out: wp.array(dtype=float),
):
    i = wp.tid()
    v = vel[i] + dt * (g_eff - drag[i] * vel[i])
    vel_out[i] = v
    depth_out[i] = depth[i] + dt * v


class SettlingTank:
    """Sediment grains released at the surface of a quiescent tank (depth positive downwards)."""

    def __init__(self, n=16, g_eff=2.5, dt=0.02, steps=100):
        self.n = n
        self.g_eff = g_eff
        self.dt = dt
        self.steps = steps

    def settle(self, drag):
        depth = wp.zeros(self.n, dtype=float, requires_grad=True)
        vel = wp.zeros(self.n, dtype=float, requires_grad=True)
        for _ in range(self.steps):
            d1 = wp.zeros(self.n, dtype=float, requires_grad=True)
            v1 = wp.zeros(self.n, dtype=float, requires_grad=True)
            wp.launch(sink, self.n, inputs=[depth, vel, drag, self.g_eff, self.dt], outputs=[d1, v1])
            depth, vel = d1, v1
        return depth
