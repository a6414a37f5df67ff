import numpy as np
import warp as wp

from .forces import spring_forces
from .integrator import integrate, shape_loss
from .mesh import grid_cloth


class ClothSim:
    def __init__(self, rows=6, cols=6, spacing=0.1, steps=80, dt=0.004, stiffness=150.0):
        pos, springs, rest, inv_mass = grid_cloth(rows, cols, spacing)
        self.n = rows * cols
        self.steps = steps
        self.dt = dt
        self.damping = 0.5
        self.gravity = wp.vec3(0.0, -9.8, 0.0)
        self.springs = wp.array(springs, dtype=int)
        self.rest = wp.array(rest, dtype=float)
        self.inv_mass = wp.array(inv_mass, dtype=float)
        self.num_springs = len(springs)
        self.stiffness = wp.array(np.full(self.num_springs, stiffness, dtype=np.float32), requires_grad=True)
        self.x = [wp.zeros(self.n, dtype=wp.vec3, requires_grad=True) for _ in range(steps + 1)]
        self.v = [wp.zeros(self.n, dtype=wp.vec3, requires_grad=True) for _ in range(steps + 1)]
        self.f = [wp.zeros(self.n, dtype=wp.vec3, requires_grad=True) for _ in range(steps)]
        self.x[0].assign(pos)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.target = wp.zeros(self.n, dtype=wp.vec3)

    def simulate(self):
        for t in range(self.steps):
            self.f[t].zero_()
            wp.launch(
                spring_forces,
                dim=self.num_springs,
                inputs=[self.x[t], self.v[t], self.springs, self.rest, self.stiffness, self.damping],
                outputs=[self.f[t]],
            )
            wp.launch(
                integrate,
                dim=self.n,
                inputs=[self.x[t], self.v[t], self.f[t], self.inv_mass, self.gravity, self.dt],
                outputs=[self.x[t + 1], self.v[t + 1]],
            )
        return self.x[self.steps]

    def forward(self):
        self.loss.zero_()
        final = self.simulate()
        wp.launch(shape_loss, dim=self.n, inputs=[final, self.target], outputs=[self.loss])
        return self.loss
