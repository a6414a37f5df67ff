import numpy as np
import warp as wp


@wp.kernel
def spring_force(
    x: wp.array(dtype=wp.vec2d),
    springs: wp.array(dtype=wp.vec2i),
    rest: wp.array(dtype=wp.float64),
    k: wp.float64,
    f: wp.array(dtype=wp.vec2d),
):
    s = wp.tid()
    i = springs[s][0]
    j = springs[s][1]
    d = x[j] - x[i]
    l = wp.length(d)
    fs = d * (k * (l - rest[s]) / l)
    wp.atomic_add(f, i, fs)
    wp.atomic_sub(f, j, fs)


@wp.kernel
def verlet_step(
    x: wp.array(dtype=wp.vec2d),
    x_prev: wp.array(dtype=wp.vec2d),
    f: wp.array(dtype=wp.vec2d),
    inv_mass: wp.float64,
    gravity: wp.vec2d,
    damping: wp.float64,
    dt: wp.float64,
    floor_k: wp.float64,
    x_next: wp.array(dtype=wp.vec2d),
):
    i = wp.tid()
    a = f[i] * inv_mass + gravity
    # soft floor at y = 0
    pen = wp.min(x[i][1], wp.float64(0.0))
    a = a + wp.vec2d(wp.float64(0.0), -floor_k * pen)
    x_next[i] = x[i] + (x[i] - x_prev[i]) * (wp.float64(1.0) - damping) + a * dt * dt


def grid(nx, ny, spacing):
    pts = np.array([[i * spacing, j * spacing] for j in range(ny) for i in range(nx)], dtype=np.float64)
    springs = []
    for j in range(ny):
        for i in range(nx):
            a = j * nx + i
            if i + 1 < nx:
                springs.append((a, a + 1))
            if j + 1 < ny:
                springs.append((a, a + nx))
            if i + 1 < nx and j + 1 < ny:
                springs.append((a, a + nx + 1))
                springs.append((a + 1, a + nx))
    return pts, np.array(springs, dtype=np.int32)


class Lattice:
    def __init__(self, nx=3, ny=3, spacing=0.2, k=400.0, mass=0.1, damping=0.01, dt=0.005, steps=60):
        self.rest_pos, springs = grid(nx, ny, spacing)
        self.n = len(self.rest_pos)
        self.springs = wp.array(springs, dtype=wp.vec2i)
        d = self.rest_pos[springs[:, 1]] - self.rest_pos[springs[:, 0]]
        self.rest = wp.array(np.linalg.norm(d, axis=1), dtype=wp.float64)
        self.k = k
        self.inv_mass = 1.0 / mass
        self.damping = damping
        self.dt = dt
        self.steps = steps
        self.gravity = wp.vec2d(0.0, -9.81)
        self.floor_k = 2.0e4

    def simulate(self, x0):
        """Release the lattice at rest from positions x0; return the positions after every step."""
        x_prev = wp.clone(x0)
        x = x0
        traj = [x]
        for _ in range(self.steps):
            f = wp.zeros(self.n, dtype=wp.vec2d, requires_grad=True)
            wp.launch(spring_force, dim=len(self.springs), inputs=[x, self.springs, self.rest, self.k], outputs=[f])
            x_next = wp.zeros(self.n, dtype=wp.vec2d, requires_grad=True)
            wp.launch(
                verlet_step,
                dim=self.n,
                inputs=[x, x_prev, f, self.inv_mass, self.gravity, self.damping, self.dt, self.floor_k],
                outputs=[x_next],
            )
            x_prev, x = x, x_next
            traj.append(x)
        return traj
