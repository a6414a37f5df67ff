import warp as wp


@wp.kernel
def ascent_step(
    h: wp.array(dtype=float),
    v: wp.array(dtype=float),
    drag: wp.array(dtype=float),
    lift: wp.array(dtype=float),
    dt: float,
    h_out: wp.array(dtype=float),
    v_out: wp.array(dtype=float),
):
    i = wp.tid()
    a = lift[i] - drag[i] * v[i] * wp.abs(v[i])
    vn = v[i] + a * dt
    v_out[i] = vn
    h_out[i] = h[i] + vn * dt


@wp.kernel
def altimeter_error(
    h: wp.array(dtype=float),
    logged: wp.array(dtype=float),
    scale: float,
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    d = h[i] - logged[i]
    wp.atomic_add(loss, 0, scale * d * d)
