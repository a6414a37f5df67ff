import warp as wp


@wp.kernel
def placement_error(x: wp.array(dtype=wp.vec2), goal: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - goal[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


def placement_loss(x, goal):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(placement_error, dim=goal.shape[0], inputs=[x, goal], outputs=[loss])
    return loss
