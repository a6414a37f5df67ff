"""Kernels: hailstones in 2-D under gravity and drag, bouncing on a 30-degree roof (penalty contact)."""

import warp as wp

ROOF_N = wp.constant(wp.vec2(-0.5, 0.8660254))
RADIUS = 0.02


@wp.kernel
def hail_step(x: wp.array(dtype=wp.vec2), v: wp.array(dtype=wp.vec2), dt: float,
              x_out: wp.array(dtype=wp.vec2), v_out: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    p = x[i]
    vi = v[i]
    f = wp.vec2(0.0, -9.81) - 0.05 * wp.length(vi) * vi
    gap = wp.dot(p, ROOF_N) - RADIUS
    if gap < 0.0:
        vn = wp.dot(vi, ROOF_N)
        f = f + (-4000.0 * gap - 20.0 * vn) * ROOF_N
    vnew = vi + dt * f
    v_out[i] = vnew
    x_out[i] = p + dt * vnew


@wp.kernel
def squared_miss(x: wp.array(dtype=wp.vec2), target: wp.array(dtype=wp.vec2), total: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(total, 0, wp.dot(d, d))
