import warp as wp


@wp.kernel
def landing_error(x: wp.array(dtype=wp.vec2d), target: wp.array(dtype=wp.vec2d), loss: wp.array(dtype=wp.float64)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


def final_pose_loss(traj, target):
    loss = wp.zeros(1, dtype=wp.float64, requires_grad=True)
    wp.launch(landing_error, dim=target.shape[0], inputs=[traj[-1], target], outputs=[loss])
    return loss
