import warp as wp


@wp.func
def bspline_weights(f: float):
    return wp.vec3(0.5 * (1.5 - f) * (1.5 - f), 0.75 - (f - 1.0) * (f - 1.0), 0.5 * (f - 0.5) * (f - 0.5))


@wp.kernel
def p2g(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    mass: float,
    inv_dx: float,
    grid_m: wp.array(dtype=float, ndim=2),
    grid_mv: wp.array(dtype=wp.vec2, ndim=2),
):
    p = wp.tid()
    gx = x[p] * inv_dx
    bx = wp.clamp(int(gx[0] - 0.5), 0, grid_m.shape[0] - 3)
    by = wp.clamp(int(gx[1] - 0.5), 0, grid_m.shape[1] - 3)
    wx = bspline_weights(gx[0] - float(bx))
    wy = bspline_weights(gx[1] - float(by))
    for i in range(3):
        for j in range(3):
            w = wx[i] * wy[j]
            wp.atomic_add(grid_m, bx + i, by + j, w * mass)
            wp.atomic_add(grid_mv, bx + i, by + j, w * mass * v[p])


@wp.kernel
def grid_update(
    grid_m: wp.array(dtype=float, ndim=2),
    grid_mv: wp.array(dtype=wp.vec2, ndim=2),
    wind: wp.array(dtype=wp.vec2),
    gravity: wp.vec2,
    dt: float,
    grid_v: wp.array(dtype=wp.vec2, ndim=2),
):
    i, j = wp.tid()
    m = grid_m[i, j]
    vel = wp.vec2(0.0, 0.0)
    if m > 1.0e-8:
        vel = grid_mv[i, j] / m + (gravity + wind[0]) * dt
    grid_v[i, j] = vel


@wp.kernel
def g2p(
    x: wp.array(dtype=wp.vec2),
    grid_v: wp.array(dtype=wp.vec2, ndim=2),
    inv_dx: float,
    dt: float,
    x_out: wp.array(dtype=wp.vec2),
    v_out: wp.array(dtype=wp.vec2),
):
    p = wp.tid()
    gx = x[p] * inv_dx
    bx = wp.clamp(int(gx[0] - 0.5), 0, grid_v.shape[0] - 3)
    by = wp.clamp(int(gx[1] - 0.5), 0, grid_v.shape[1] - 3)
    wx = bspline_weights(gx[0] - float(bx))
    wy = bspline_weights(gx[1] - float(by))
    vel = wp.vec2(0.0, 0.0)
    for i in range(3):
        for j in range(3):
            vel = vel + wx[i] * wy[j] * grid_v[bx + i, by + j]
    v_out[p] = vel
    x_out[p] = x[p] + vel * dt
