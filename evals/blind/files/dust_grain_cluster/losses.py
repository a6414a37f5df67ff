import warp as wp


@wp.kernel
def landing_error(x: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def spacing_penalty(x: wp.array(dtype=wp.vec3), r0: float, weight: float, loss: wp.array(dtype=float)):
    i, j = wp.tid()
    d = x[i] - x[j]
    r = wp.sqrt(wp.dot(d, d))
    mask = wp.where(i == j, 0.0, 1.0)
    wp.atomic_add(loss, 0, weight * mask * wp.exp(-r / r0))


def cluster_loss(x, target, r0=0.05, weight=0.02):
    n = x.shape[0]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(landing_error, n, inputs=[x, target], outputs=[loss])
    wp.launch(spacing_penalty, (n, n), inputs=[x, r0, weight], outputs=[loss])
    return loss
