import warp as wp

NUM_JOINTS = 4


@wp.kernel
def reach_error(
    angles: wp.array(dtype=float, ndim=2),
    link_lengths: wp.array(dtype=float),
    targets: wp.array(dtype=wp.vec2),
    err: wp.array(dtype=float),
):
    """Squared distance between the planar end effector of pose p and its target."""
    p = wp.tid()
    heading = float(0.0)
    tip = wp.vec2(0.0, 0.0)
    for j in range(NUM_JOINTS):
        heading = heading + angles[p, j]
        tip = tip + link_lengths[j] * wp.vec2(wp.cos(heading), wp.sin(heading))
    d = tip - targets[p]
    err[p] = wp.dot(d, d)
