import numpy as np
import warp as wp


@wp.kernel
def spring_forces(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    ends: wp.array(dtype=wp.int32, ndim=2),
    k: wp.array(dtype=float),
    rest: wp.array(dtype=float),
    kd: float,
    f: wp.array(dtype=wp.vec3),
):
    s = wp.tid()
    a = ends[s, 0]
    b = ends[s, 1]
    d = x[b] - x[a]
    l = wp.length(d)
    n = d / l
    vrel = wp.dot(v[b] - v[a], n)
    fs = (k[s] * (l - rest[s]) + kd * vrel) * n
    wp.atomic_add(f, a, fs)
    wp.atomic_sub(f, b, fs)


@wp.kernel
def integrate(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    f: wp.array(dtype=wp.vec3),
    inv_m: wp.array(dtype=float),
    gravity: wp.vec3,
    dt: float,
    x_new: wp.array(dtype=wp.vec3),
    v_new: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    w = inv_m[i]
    vn = v[i] + dt * (f[i] * w + gravity * wp.step(-w))
    x_new[i] = x[i] + dt * vn
    v_new[i] = vn


class Chain:
    """A chain of point masses hanging from particle 0, joined by damped springs."""

    def __init__(self, n=8, link=0.1, mass=0.05, dt=0.004, steps=80, damping=0.02):
        self.n = n
        self.dt = dt
        self.steps = steps
        self.kd = damping
        self.gravity = wp.vec3(0.0, -9.81, 0.0)
        # start horizontal, so the chain swings down under gravity
        x0 = np.zeros((n, 3), dtype=np.float32)
        x0[:, 0] = np.arange(n) * link
        self.x0 = wp.array(x0, dtype=wp.vec3)
        self.v0 = wp.zeros(n, dtype=wp.vec3)
        inv_m = np.full(n, 1.0 / mass, dtype=np.float32)
        inv_m[0] = 0.0
        self.inv_m = wp.array(inv_m, dtype=float)
        ends = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1).astype(np.int32)
        self.ends = wp.array(ends, dtype=wp.int32)
        self.rest = wp.array(np.full(n - 1, link, dtype=np.float32), dtype=float)

    def simulate(self, k):
        """Roll the chain forward with per-spring stiffness k; returns the list of positions."""
        xs = [self.x0]
        vs = [self.v0]
        for _ in range(self.steps):
            f = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)
            wp.launch(spring_forces, self.n - 1, inputs=[xs[-1], vs[-1], self.ends, k, self.rest, self.kd], outputs=[f])
            x_new = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)
            v_new = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)
            wp.launch(
                integrate,
                self.n,
                inputs=[xs[-1], vs[-1], f, self.inv_m, self.gravity, self.dt],
                outputs=[x_new, v_new],
            )
            xs.append(x_new)
            vs.append(v_new)
        return xs
