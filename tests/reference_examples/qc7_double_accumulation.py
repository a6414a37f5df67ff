"""quick-checks §7: a duplicated launch (inert unless retain_grad) and a sum seed for a mean objective."""

import json

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def double(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


@wp.kernel
def sq_err(y: wp.array(dtype=float), target: wp.array(dtype=float), err: wp.array(dtype=float)):
    i = wp.tid()
    err[i] = (y[i] - target[i]) * (y[i] - target[i])


def duplicate_launch(retain_grad):
    x = wp.array([1.0], dtype=float, requires_grad=True)
    y = wp.zeros(1, dtype=float, requires_grad=True, retain_grad=retain_grad)
    tape = wp.Tape()
    with tape:
        wp.launch(double, dim=1, inputs=[x], outputs=[y])
        wp.launch(double, dim=1, inputs=[x], outputs=[y])  # BUG: recorded twice (e.g. a warm-up call)
    tape.backward(grads={y: wp.ones(1, dtype=float)})
    return x.grad.numpy().tolist()


def mean_loss_gradient():
    n = 4
    x = wp.array(np.arange(1.0, n + 1.0), dtype=float, requires_grad=True)
    y = wp.zeros(n, dtype=float, requires_grad=True)
    target = wp.zeros(n, dtype=float)
    err = wp.zeros(n, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(double, dim=n, inputs=[x], outputs=[y])
        wp.launch(sq_err, dim=n, inputs=[y, target], outputs=[err])
    reported = float(err.numpy().mean())  # the objective the user prints is the MEAN
    tape.backward(grads={err: wp.ones(n, dtype=float)})  # BUG: a ones seed backpropagates the SUM
    seeded_with_ones = x.grad.numpy().copy()
    tape.zero()
    tape.backward(grads={err: wp.full(n, 1.0 / n, dtype=float)})  # seed = d(mean)/d(err)
    return reported, seeded_with_ones.tolist(), x.grad.numpy().tolist()


reported, ones_seed, mean_seed = mean_loss_gradient()
print(
    json.dumps(
        {
            "duplicate_plain": duplicate_launch(retain_grad=False),
            "duplicate_retain_grad": duplicate_launch(retain_grad=True),
            "duplicate_expected": [2.0],
            "mean_objective": reported,
            "mean_ones_seed": ones_seed,
            "mean_correct_seed": mean_seed,
            "mean_expected": [8.0 * v / 4 for v in (1.0, 2.0, 3.0, 4.0)],
        }
    )
)
