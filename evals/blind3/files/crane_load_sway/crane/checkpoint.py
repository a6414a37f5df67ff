"""Checkpointed gradient of the residual swing: only the segment boundaries are kept; each segment
is recomputed under its own tape on the way back, seeded with the adjoint of its end state."""

import numpy as np
import warp as wp


def _leaf(values):
    return wp.array(values, dtype=float, requires_grad=True)


def loss_and_grad(yard, gain):
    n_seg = yard.steps // yard.segment
    # forward: boundary states only, no tape
    bounds = [(yard.theta0.copy(), yard.omega0.copy())]
    theta, omega = _leaf(yard.theta0), _leaf(yard.omega0)
    for _ in range(n_seg):
        theta, omega = yard.advance(theta, omega, gain, yard.segment)
        bounds.append((theta.numpy().copy(), omega.numpy().copy()))
    loss_value = float(yard.swing_loss(theta, omega).numpy()[0])

    # backward: last segment first
    grad = np.zeros(yard.n, dtype=np.float32)
    adj_theta = adj_omega = None
    for s in reversed(range(n_seg)):
        th0, om0 = _leaf(bounds[s][0]), _leaf(bounds[s][1])
        tape = wp.Tape()
        with tape:
            th1, om1 = yard.advance(th0, om0, gain, yard.segment)
            if s == n_seg - 1:
                loss = yard.swing_loss(th1, om1)
        if s == n_seg - 1:
            tape.backward(loss)
        else:
            tape.backward(
                grads={th1: wp.array(adj_theta, dtype=float), om1: wp.array(adj_omega, dtype=float)}
            )
        adj_theta, adj_omega = th0.grad.numpy().copy(), om0.grad.numpy().copy()
        grad += gain.grad.numpy()
        tape.zero()
    return loss_value, grad
