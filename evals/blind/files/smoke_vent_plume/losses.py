import warp as wp


@wp.kernel
def detector_misfit(
    c: wp.array2d(dtype=float),
    cells: wp.array(dtype=wp.int32, ndim=2),
    measured: wp.array(dtype=float),
    loss: wp.array(dtype=float),
):
    k = wp.tid()
    r = c[cells[k, 0], cells[k, 1]] - measured[k]
    wp.atomic_add(loss, 0, 0.5 * r * r)
