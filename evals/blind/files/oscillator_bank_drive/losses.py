import warp as wp


@wp.kernel
def final_offset(x: wp.array(dtype=float), target: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    e = x[i] - target
    wp.atomic_add(loss, 0, e * e)


@wp.kernel
def damping_prior(c: wp.array(dtype=float), c_ref: float, weight: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = c[i] - c_ref
    wp.atomic_add(loss, 0, weight * d * d)
