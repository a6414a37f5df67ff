import warp as wp


@wp.kernel
def pair_accel(
    x: wp.array(dtype=wp.vec3d),
    mass: wp.array(dtype=wp.float64),
    G: wp.float64,
    soft2: wp.float64,
    acc: wp.array(dtype=wp.vec3d),
):
    i, j = wp.tid()
    if i == j:
        return
    d = x[j] - x[i]
    r2 = wp.dot(d, d) + soft2
    inv_r3 = wp.float64(1.0) / (r2 * wp.sqrt(r2))
    wp.atomic_add(acc, i, G * mass[j] * inv_r3 * d)


@wp.kernel
def position_verlet(
    x: wp.array(dtype=wp.vec3d),
    x_prev: wp.array(dtype=wp.vec3d),
    acc: wp.array(dtype=wp.vec3d),
    dt: wp.float64,
    x_next: wp.array(dtype=wp.vec3d),
):
    i = wp.tid()
    x_next[i] = wp.float64(2.0) * x[i] - x_prev[i] + acc[i] * dt * dt
