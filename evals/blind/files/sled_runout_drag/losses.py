import warp as wp


@wp.kernel
def sq_dist(x: wp.array(dtype=float), stops: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - stops[i]
    wp.atomic_add(loss, 0, d * d)
