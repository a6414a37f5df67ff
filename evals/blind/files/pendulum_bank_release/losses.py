import warp as wp


@wp.kernel
def phase_error(theta: wp.array(dtype=float), omega: wp.array(dtype=float), theta_goal: wp.array(dtype=float),
                loss: wp.array(dtype=float)):
    i = wp.tid()
    e = theta[i] - theta_goal[i]
    wp.atomic_add(loss, 0, e * e + 0.01 * omega[i] * omega[i])


def end_state_loss(theta, omega, goal):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(phase_error, theta.shape[0], inputs=[theta, omega, goal], outputs=[loss])
    return loss
