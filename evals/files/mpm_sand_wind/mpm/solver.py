import numpy as np
import warp as wp

from .transfer import g2p, grid_update, p2g


class PicSolver:
    """A small particle-in-cell sand simulation on a 32x32 grid over the unit square."""

    def __init__(self, num_steps, res=32, dt=0.01):
        self.res = res
        self.inv_dx = float(res)
        self.dt = dt
        self.num_steps = num_steps
        self.gravity = wp.vec2(0.0, -2.0)
        rng = np.random.default_rng(1)
        pts = np.stack(np.meshgrid(np.linspace(0.3, 0.45, 6), np.linspace(0.55, 0.7, 6)), -1).reshape(-1, 2)
        pts += rng.normal(0.0, 0.004, pts.shape)
        self.num_particles = len(pts)
        self.mass = 1.0 / self.num_particles
        self.x = [wp.zeros(self.num_particles, dtype=wp.vec2, requires_grad=True) for _ in range(num_steps + 1)]
        self.v = [wp.zeros(self.num_particles, dtype=wp.vec2, requires_grad=True) for _ in range(num_steps + 1)]
        self.x[0].assign(pts.astype(np.float32))
        shape = (res, res)
        self.grid_m = [wp.zeros(shape, dtype=float, requires_grad=True) for _ in range(num_steps)]
        self.grid_mv = [wp.zeros(shape, dtype=wp.vec2, requires_grad=True) for _ in range(num_steps)]
        self.grid_v = [wp.zeros(shape, dtype=wp.vec2, requires_grad=True) for _ in range(num_steps)]

    def step(self, t, wind):
        self.grid_m[t].zero_()
        self.grid_mv[t].zero_()
        n = self.num_particles
        wp.launch(p2g, dim=n, inputs=[self.x[t], self.v[t], self.mass, self.inv_dx], outputs=[self.grid_m[t], self.grid_mv[t]])
        wp.launch(
            grid_update,
            dim=(self.res, self.res),
            inputs=[self.grid_m[t], self.grid_mv[t], wind, self.gravity, self.dt],
            outputs=[self.grid_v[t]],
        )
        wp.launch(g2p, dim=n, inputs=[self.x[t], self.grid_v[t], self.inv_dx, self.dt], outputs=[self.x[t + 1], self.v[t + 1]])
