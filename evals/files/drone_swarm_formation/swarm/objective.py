import warp as wp

from .state import SwarmState


@wp.kernel
def formation_error(
    s: SwarmState, target: wp.array(dtype=wp.vec3), target_vel: wp.vec3, weight: float, loss: wp.array(dtype=float)
):
    i = wp.tid()
    d = s.pos[i] - target[i]
    e = s.vel[i] - target_vel
    wp.atomic_add(loss, 0, weight * (wp.dot(d, d) + wp.dot(e, e)))


def formation_loss(state: SwarmState, target, target_vel, loss):
    """Mean squared miss of the formation position and of the formation's cruise velocity at arrival."""
    loss.zero_()
    n = target.shape[0]
    wp.launch(formation_error, dim=n, inputs=[state, target, target_vel, 1.0 / n], outputs=[loss])
    return loss
