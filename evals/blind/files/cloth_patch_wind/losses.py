import warp as wp


@wp.kernel
def drape_error(x: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


def drape_loss(x, target):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(drape_error, x.shape[0], inputs=[x, target], outputs=[loss])
    return loss
