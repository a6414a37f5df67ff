import numpy as np
import warp as wp


@wp.kernel
def apply_burn(v: wp.array(dtype=wp.vec2), dv: wp.array(dtype=wp.vec2), v_out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    v_out[i] = v[i] + dv[i]


@wp.kernel
def kepler_step(
    r: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    mu: float,
    dt: float,
    r_out: wp.array(dtype=wp.vec2),
    v_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    ri = r[i]
    d2 = wp.dot(ri, ri)
    a = -mu / (d2 * wp.sqrt(d2)) * ri
    vn = v[i] + a * dt
    v_out[i] = vn
    r_out[i] = ri + vn * dt


def coast(r0, v0, dv, mu, dt, steps):
    r = r0
    v = wp.empty_like(v0, requires_grad=True)
    wp.launch(apply_burn, dim=len(v0), inputs=[v0, dv], outputs=[v])
    for _ in range(steps):
        rn = wp.empty_like(r0, requires_grad=True)
        vn = wp.empty_like(v0, requires_grad=True)
        wp.launch(kepler_step, dim=len(r0), inputs=[r, v, mu, dt], outputs=[rn, vn])
        r, v = rn, vn
    return r, v


def elliptic_states(n, a, e, seed):
    rng = np.random.default_rng(seed)
    r_p = a * (1 - e)
    v_p = np.sqrt((1 + e) / r_p)
    ang = rng.uniform(0, 2 * np.pi, n)
    c, s = np.cos(ang), np.sin(ang)
    r = (r_p * np.stack([c, s], 1)).astype(np.float32)
    v = (v_p * np.stack([-s, c], 1)).astype(np.float32)
    return r, v
