import numpy as np
import warp as wp


@wp.kernel
def spring_forces(
    q: wp.array(dtype=wp.vec3d),
    qd: wp.array(dtype=wp.vec3d),
    rest: wp.float64,
    ke: wp.float64,
    kd: wp.float64,
    f: wp.array(dtype=wp.vec3d),
):
    s = wp.tid()
    i = s
    j = s + 1
    d = q[j] - q[i]
    l = wp.length(d)
    n = d / l
    vrel = wp.dot(qd[j] - qd[i], n)
    fs = n * (ke * (l - rest) + kd * vrel)
    wp.atomic_add(f, i, fs)
    wp.atomic_sub(f, j, fs)


@wp.kernel
def integrate(
    q: wp.array(dtype=wp.vec3d),
    qd: wp.array(dtype=wp.vec3d),
    f: wp.array(dtype=wp.vec3d),
    wind: wp.array(dtype=wp.vec3d),
    inv_mass: wp.float64,
    gravity: wp.vec3d,
    drag: wp.float64,
    dt: wp.float64,
    q_out: wp.array(dtype=wp.vec3d),
    qd_out: wp.array(dtype=wp.vec3d),
):
    i = wp.tid()
    if i == 0:
        q_out[i] = q[i]
        qd_out[i] = wp.vec3d()
        return
    a = (f[i] + wind[i] - drag * qd[i]) * inv_mass + gravity
    v = qd[i] + a * dt
    q_out[i] = q[i] + v * dt
    qd_out[i] = v


class ChainState:
    def __init__(self, n, q=None, qd=None):
        if q is None:
            self.q = wp.zeros(n, dtype=wp.vec3d, requires_grad=True)
            self.qd = wp.zeros(n, dtype=wp.vec3d, requires_grad=True)
        else:
            self.q = wp.array(q, dtype=wp.vec3d, requires_grad=True)
            self.qd = wp.array(qd, dtype=wp.vec3d, requires_grad=True)


class ChainModel:
    """A rope of point masses hanging from a fixed hook (particle 0)."""

    def __init__(self, num_links=7, link_length=0.1, mass=0.05, ke=60.0, kd=0.05, drag=0.02, dt=0.01):
        self.n = num_links + 1
        self.rest = link_length
        self.ke = ke
        self.kd = kd
        self.inv_mass = 1.0 / mass
        self.drag = drag
        self.dt = dt
        self.gravity = wp.vec3d(0.0, -9.81, 0.0)

    def rest_pose(self):
        q = np.zeros((self.n, 3))
        q[:, 1] = -self.rest * np.arange(self.n)
        return q

    def step(self, s_in, s_out, wind):
        f = wp.zeros(self.n, dtype=wp.vec3d, requires_grad=True)
        wp.launch(spring_forces, dim=self.n - 1,
                  inputs=[s_in.q, s_in.qd, self.rest, self.ke, self.kd], outputs=[f])
        wp.launch(integrate, dim=self.n,
                  inputs=[s_in.q, s_in.qd, f, wind, self.inv_mass, self.gravity, self.drag, self.dt],
                  outputs=[s_out.q, s_out.qd])
