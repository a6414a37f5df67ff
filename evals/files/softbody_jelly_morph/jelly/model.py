import itertools

import numpy as np
import warp as wp


class State:
    """Particle positions, velocities and the force accumulator of one time step."""

    def __init__(self, n):
        self.x = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        self.v = wp.zeros(n, dtype=wp.vec3, requires_grad=True)
        self.f = wp.zeros(n, dtype=wp.vec3, requires_grad=True)


class JellyModel:
    """A cube of jelly: particles on a lattice joined by every spring up to the cube diagonal."""

    def __init__(self, size=3, spacing=0.1, stiffness=400.0, mass=0.05):
        pts = np.array(list(itertools.product(range(size), repeat=3)), dtype=np.float32) * spacing
        self.num_particles = len(pts)
        pairs = []
        for i in range(len(pts)):
            for j in range(i + 1, len(pts)):
                if np.linalg.norm(pts[i] - pts[j]) < spacing * 1.8:
                    pairs.append((i, j))
        pairs = np.array(pairs, dtype=np.int32)
        self.num_springs = len(pairs)
        self.rest_positions = pts
        self.springs = wp.array(pairs, dtype=int)
        self.rest = wp.array(np.linalg.norm(pts[pairs[:, 0]] - pts[pairs[:, 1]], axis=1), dtype=float)
        self.stiffness = stiffness
        self.inv_mass = 1.0 / mass

    def state(self):
        return State(self.num_particles)
