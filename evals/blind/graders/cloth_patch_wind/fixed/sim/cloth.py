import numpy as np
import warp as wp


@wp.kernel
def eval_springs(
    x: wp.array(dtype=wp.vec3),
    idx: wp.array(dtype=wp.int32, ndim=2),
    rest: wp.array(dtype=float),
    k: wp.array(dtype=float),
    f: wp.array(dtype=wp.vec3),
):
    s = wp.tid()
    i = idx[s, 0]
    j = idx[s, 1]
    d = x[j] - x[i]
    l = wp.length(d)
    fs = k[s] * (l - rest[s]) * d / l
    wp.atomic_add(f, i, fs)
    wp.atomic_sub(f, j, fs)


@wp.kernel
def step_particles(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    f: wp.array(dtype=wp.vec3),
    pinned: wp.array(dtype=float),
    wind: wp.vec3,
    mass: float,
    drag: float,
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    free = 1.0 - pinned[i]
    a = f[i] / mass + wp.vec3(0.0, -9.81, 0.0) + drag * (wind - v[i])
    vn = (v[i] + dt * a) * free
    v_out[i] = vn
    x_out[i] = x[i] + dt * vn


class ClothPatch:
    def __init__(self, nx=5, ny=5, spacing=0.1, mass=0.01, dt=0.002, steps=120):
        self.nx, self.ny = nx, ny
        self.n = nx * ny
        self.mass = mass
        self.drag = 0.8
        self.dt = dt
        self.steps = steps
        self.wind = wp.vec3(1.5, 0.0, 0.5)
        pos = np.array([[i * spacing, 0.0, j * spacing] for j in range(ny) for i in range(nx)], dtype=np.float32)
        springs = []
        for j in range(ny):
            for i in range(nx):
                p = j * nx + i
                if i + 1 < nx:
                    springs.append((p, p + 1))
                if j + 1 < ny:
                    springs.append((p, p + nx))
                if i + 1 < nx and j + 1 < ny:
                    springs.append((p, p + nx + 1))
                    springs.append((p + 1, p + nx))
        springs = np.array(springs, dtype=np.int32)
        self.num_springs = len(springs)
        self.idx = wp.array(springs, dtype=wp.int32)
        rest = np.linalg.norm(pos[springs[:, 1]] - pos[springs[:, 0]], axis=1).astype(np.float32)
        self.rest = wp.array(rest, dtype=float)
        pinned = np.zeros(self.n, dtype=np.float32)
        pinned[[0, nx - 1]] = 1.0
        self.pinned = wp.array(pinned, dtype=float)
        self.pos0 = pos
        # state buffers
        self.x = [wp.array(pos, dtype=wp.vec3, requires_grad=True) for _ in range(2)]
        self.v = [wp.zeros(self.n, dtype=wp.vec3, requires_grad=True) for _ in range(2)]

    def reset(self):
        self.x[0].assign(self.pos0)
        self.v[0].zero_()

    def simulate(self, k):
        # one state buffer per step: the backward pass needs every intermediate state
        x = wp.array(self.pos0, dtype=wp.vec3, requires_grad=True)
        v = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)
        for t in range(self.steps):
            f = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)
            wp.launch(eval_springs, self.num_springs, inputs=[x, self.idx, self.rest, k], outputs=[f])
            x_out = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)
            v_out = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)
            wp.launch(
                step_particles,
                self.n,
                inputs=[x, v, f, self.pinned, self.wind, self.mass, self.drag, self.dt],
                outputs=[x_out, v_out],
            )
            x, v = x_out, v_out
        return x
