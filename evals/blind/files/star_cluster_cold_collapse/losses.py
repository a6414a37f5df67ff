import warp as wp


@wp.kernel
def astrometry_residual(
    x: wp.array(dtype=wp.vec3d),
    obs: wp.array(dtype=wp.vec3d),
    loss: wp.array(dtype=wp.float64),
):
    i = wp.tid()
    d = x[i] - obs[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


def fit_loss(traj, observations, frames):
    loss = wp.zeros(1, dtype=wp.float64, requires_grad=True)
    for frame, obs in zip(frames, observations):
        wp.launch(astrometry_residual, dim=obs.shape[0], inputs=[traj[frame], obs], outputs=[loss])
    return loss
