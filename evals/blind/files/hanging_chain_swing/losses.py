import warp as wp


@wp.kernel
def shape_error(q: wp.array(dtype=wp.vec3d), target: wp.array(dtype=wp.vec3d), loss: wp.array(dtype=wp.float64)):
    i = wp.tid()
    d = q[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


def pose_loss(state, target):
    loss = wp.zeros(1, dtype=wp.float64, requires_grad=True)
    wp.launch(shape_error, dim=len(target), inputs=[state.q, target], outputs=[loss])
    return loss
