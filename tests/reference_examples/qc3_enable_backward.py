"""quick-checks §3: a kernel with enable_backward=False cuts the gradient flowing through it."""

import json

import warp as wp

wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def double(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


@wp.kernel(enable_backward=False)  # e.g. copied from a forward-only renderer
def double_nobwd(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


@wp.kernel
def combine(x: wp.array(dtype=float), y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 3.0 * x[i] + y[i])


def gradient(kernel):
    x = wp.array([1.0], dtype=float, requires_grad=True)
    y = wp.zeros(1, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=1, inputs=[x], outputs=[y])
        wp.launch(combine, dim=1, inputs=[x, y], outputs=[loss])
    tape.backward(loss)  # with double_nobwd: "Running the tape backwards may produce incorrect gradients ..."
    return x.grad.numpy().tolist()


print(json.dumps({"buggy": gradient(double_nobwd), "fixed": gradient(double), "expected": [5.0]}))
