import numpy as np
import warp as wp

from .gravity import pair_accel, position_verlet


class ClusterSim:
    """Few-body cluster released from rest, integrated with position Verlet."""

    def __init__(self, masses, dt=0.01, soft=0.1, G=1.0):
        self.mass = wp.array(np.asarray(masses, dtype=np.float64), dtype=wp.float64)
        self.n = len(masses)
        self.dt = dt
        self.soft2 = soft * soft
        self.G = G
        self.x0 = None
        self.x_prev = None

    def reset(self, x0):
        self.x0 = x0
        self.x_prev = wp.clone(x0)

    def run(self, steps):
        x_prev, x = self.x_prev, self.x0
        traj = [x]
        for _ in range(steps):
            acc = wp.zeros(self.n, dtype=wp.vec3d, requires_grad=True)
            wp.launch(pair_accel, dim=(self.n, self.n), inputs=[x, self.mass, self.G, self.soft2], outputs=[acc])
            x_next = wp.empty(self.n, dtype=wp.vec3d, requires_grad=True)
            wp.launch(position_verlet, dim=self.n, inputs=[x, x_prev, acc, self.dt], outputs=[x_next])
            x_prev, x = x, x_next
            traj.append(x)
        return traj
