import warp as wp


@wp.kernel
def angle_residual(theta: wp.array(dtype=float), measured: wp.array(dtype=float), w: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    r = theta[i] - measured[i]
    wp.atomic_add(loss, 0, w * r * r)


def encoder_loss(history, measurements, every):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    frames = range(every, len(history), every)
    w = 1.0 / (len(frames) * measurements[0].shape[0])
    for k, f in enumerate(frames):
        wp.launch(angle_residual, dim=measurements[k].shape[0], inputs=[history[f], measurements[k], w], outputs=[loss])
    return loss
