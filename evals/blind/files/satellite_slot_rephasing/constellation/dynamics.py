import numpy as np
import warp as wp


@wp.kernel
def orbit_step(
    q: wp.array(dtype=wp.vec2),
    qd: wp.array(dtype=wp.vec2),
    thrust: wp.array(dtype=wp.vec2),
    gm: float,
    drag: float,
    dt: float,
    q_out: wp.array(dtype=wp.vec2),
    qd_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    r = q[i]
    r2 = wp.dot(r, r)
    inv_r3 = 1.0 / (r2 * wp.sqrt(r2))
    a = -gm * inv_r3 * r + thrust[i] - drag * qd[i]
    v = qd[i] + a * dt
    q_out[i] = r + v * dt
    qd_out[i] = v


class State:
    def __init__(self, n):
        self.q = wp.zeros(n, dtype=wp.vec2, requires_grad=True)
        self.qd = wp.zeros(n, dtype=wp.vec2, requires_grad=True)


def ring(n, radius, gm, phase_jitter=0.0, seed=0):
    rng = np.random.default_rng(seed)
    th = np.linspace(0.0, 2 * np.pi, n, endpoint=False) + phase_jitter * rng.standard_normal(n)
    speed = np.sqrt(gm / radius)
    q = radius * np.stack([np.cos(th), np.sin(th)], 1)
    qd = speed * np.stack([-np.sin(th), np.cos(th)], 1)
    return q.astype(np.float32), qd.astype(np.float32)


class Constellation:
    def __init__(self, n, gm=1.0, drag=0.01, dt=0.05):
        self.n = n
        self.gm = gm
        self.drag = drag
        self.dt = dt

    def step(self, s, s_next, thrust):
        wp.launch(orbit_step, dim=self.n, inputs=[s.q, s.qd, thrust, self.gm, self.drag, self.dt],
                  outputs=[s_next.q, s_next.qd])
