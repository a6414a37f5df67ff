import warp as wp


@wp.kernel
def slot_error(q: wp.array(dtype=wp.vec2), slots: wp.array(dtype=wp.vec2), weight: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - slots[i]
    wp.atomic_add(loss, 0, weight * wp.dot(d, d))


def slot_loss(state, slots):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(slot_error, dim=slots.shape[0], inputs=[state.q, slots, 100.0], outputs=[loss])
    return loss
