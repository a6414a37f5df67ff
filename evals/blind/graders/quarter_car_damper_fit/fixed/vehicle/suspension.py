import numpy as np
import warp as wp

BETA = 0.5


@wp.func
def damper_force(c: float, vrel: float):
    # progressive damper: stiffer at high shaft speed
    return -c * vrel * (1.0 + BETA * vrel * vrel)


@wp.func_grad(damper_force)
def adj_damper_force(c: float, vrel: float, adj_ret: float):
    wp.adjoint[c] += -adj_ret * vrel * (1.0 + BETA * vrel * vrel)
    wp.adjoint[vrel] += -adj_ret * c * (1.0 + 3.0 * BETA * vrel * vrel)


@wp.kernel
def quarter_car_step(
    zs: wp.array(dtype=float),
    vs: wp.array(dtype=float),
    zu: wp.array(dtype=float),
    vu: wp.array(dtype=float),
    c: wp.array(dtype=float),
    road: float,
    ks: float,
    kt: float,
    ms: float,
    mu: float,
    dt: float,
    zs_out: wp.array(dtype=float),
    vs_out: wp.array(dtype=float),
    zu_out: wp.array(dtype=float),
    vu_out: wp.array(dtype=float),
):
    i = wp.tid()
    fd = damper_force(c[i], vs[i] - vu[i])
    fs = -ks * (zs[i] - zu[i])
    ft = -kt * (zu[i] - road)
    a_s = (fs + fd) / ms
    a_u = (ft - fs - fd) / mu
    vs_n = vs[i] + a_s * dt
    vu_n = vu[i] + a_u * dt
    vs_out[i] = vs_n
    vu_out[i] = vu_n
    zs_out[i] = zs[i] + vs_n * dt
    zu_out[i] = zu[i] + vu_n * dt


def road_profile(steps, dt):
    t = np.arange(steps) * dt
    bump = 0.05 * np.exp(-((t - 0.3) / 0.04) ** 2) - 0.03 * np.exp(-((t - 0.9) / 0.06) ** 2)
    return bump.astype(np.float32)


class TestRig:
    """Four quarter-car corners driven over the same road profile."""

    def __init__(self, n=4, ks=40.0, kt=400.0, ms=1.0, mu=0.15, dt=0.005, steps=300):
        self.n = n
        self.ks, self.kt, self.ms, self.mu = ks, kt, ms, mu
        self.dt = dt
        self.steps = steps
        self.road = road_profile(steps, dt)

    def drive(self, c):
        z = [wp.zeros(self.n, dtype=float, requires_grad=True) for _ in range(4)]
        body = []
        for k in range(self.steps):
            nxt = [wp.zeros(self.n, dtype=float, requires_grad=True) for _ in range(4)]
            wp.launch(
                quarter_car_step,
                dim=self.n,
                inputs=[z[0], z[1], z[2], z[3], c, float(self.road[k]), self.ks, self.kt, self.ms, self.mu, self.dt],
                outputs=nxt,
            )
            z = nxt
            body.append(z[0])
        return body
