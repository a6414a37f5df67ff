import warp as wp


@wp.kernel
def heave_error(z: wp.array(dtype=float), logged: wp.array(dtype=float), w: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = z[i] - logged[i]
    wp.atomic_add(loss, 0, w * d * d)


def heave_loss(body, logs, every=10):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    frames = list(range(every - 1, len(body), every))
    w = 1.0e4 / (len(frames) * logs[0].shape[0])
    for k, f in enumerate(frames):
        wp.launch(heave_error, dim=logs[k].shape[0], inputs=[body[f], logs[k], w], outputs=[loss])
    return loss
