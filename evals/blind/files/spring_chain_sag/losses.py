import warp as wp


@wp.kernel
def tip_misfit(x: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


def shape_loss(x_final, target):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(tip_misfit, x_final.shape[0], inputs=[x_final, target], outputs=[loss])
    return loss
