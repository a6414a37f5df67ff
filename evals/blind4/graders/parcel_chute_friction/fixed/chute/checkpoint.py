"""Checkpointed gradient of the stop error: store the state at segment boundaries, then recompute
each segment under its own tape, last segment first, seeding it with the adjoint of its end state."""

import numpy as np
import warp as wp

from .physics import STEPS

SEGMENTS = 4


def checkpointed_grad(chute, mu):
    seg_steps = STEPS // SEGMENTS
    # forward, no tape: keep only the boundary states
    bounds = [(chute.x0, chute.v0)]
    for _ in range(SEGMENTS):
        x, v = chute.advance(*bounds[-1], mu, seg_steps)
        bounds.append((x, v))
    value = float(chute.error(bounds[-1][0]).numpy()[0])

    grad_mu = np.zeros(mu.shape[0])
    adj_x = adj_v = None
    for seg in reversed(range(SEGMENTS)):
        x0 = wp.clone(bounds[seg][0], requires_grad=True)
        v0 = wp.clone(bounds[seg][1], requires_grad=True)
        tape = wp.Tape()
        with tape:
            xe, ve = chute.advance(x0, v0, mu, seg_steps)
            if seg == SEGMENTS - 1:
                loss = chute.error(xe)
        if seg == SEGMENTS - 1:
            tape.backward(loss)
        else:
            tape.backward(grads={xe: adj_x, ve: adj_v})
        grad_mu += mu.grad.numpy()
        mu.grad.zero_()
        adj_x = wp.clone(x0.grad, requires_grad=False)
        adj_v = wp.clone(v0.grad, requires_grad=False)
    return value, grad_mu
