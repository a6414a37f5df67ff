"""Eight quadrotors climbing to a 2 m hover: a Warp rollout wrapped as a torch autograd Function."""

import numpy as np
import torch
import warp as wp

N = 8
STEPS = 100
DT = 0.02
Z_REF = 2.0
U_MAX = 30.0


@wp.kernel
def climb_step(z: wp.array(dtype=float), w: wp.array(dtype=float), gains: wp.array2d(dtype=float),
               mass: wp.array(dtype=float), dt: float, z_out: wp.array(dtype=float),
               w_out: wp.array(dtype=float), err: wp.array(dtype=float)):
    i = wp.tid()
    raw = mass[i] * 9.81 + gains[i, 0] * (Z_REF - z[i]) - gains[i, 1] * w[i]
    thrust = U_MAX * wp.tanh(raw / U_MAX)
    a = thrust / mass[i] - 9.81 - 0.3 * w[i]
    wn = w[i] + dt * a
    zn = z[i] + dt * wn
    w_out[i] = wn
    z_out[i] = zn
    e = zn - Z_REF
    wp.atomic_add(err, i, dt * e * e)


class HoverRollout(torch.autograd.Function):
    """Per-drone tracking error of a climb-and-hover rollout, differentiable w.r.t. the PD gains."""

    @staticmethod
    def forward(ctx, gains, mass):
        ctx.tape = wp.Tape()
        ctx.gains = wp.from_torch(gains.detach().clone(), requires_grad=True)
        with ctx.tape:
            z = wp.zeros(N, dtype=float, requires_grad=True)
            w = wp.zeros(N, dtype=float, requires_grad=True)
            ctx.err = wp.zeros(N, dtype=float, requires_grad=True)
            for _ in range(STEPS):
                z_next = wp.empty(N, dtype=float, requires_grad=True)
                w_next = wp.empty(N, dtype=float, requires_grad=True)
                wp.launch(climb_step, dim=N, inputs=[z, w, ctx.gains, mass, DT],
                          outputs=[z_next, w_next, ctx.err])
                z, w = z_next, w_next
        return wp.to_torch(ctx.err).clone()

    @staticmethod
    def backward(ctx, grad_err):
        ctx.tape.backward(grads={ctx.err: wp.ones(N, dtype=float)})
        grad_gains = wp.to_torch(ctx.gains.grad).clone()
        ctx.tape.zero()
        return grad_gains, None


def drone_masses():
    return wp.array(np.linspace(0.8, 1.5, N), dtype=float)
