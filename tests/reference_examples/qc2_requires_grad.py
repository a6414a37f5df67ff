"""quick-checks §2: one intermediate array without requires_grad silently zeroes every upstream gradient."""

import json

import warp as wp

wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 3.0 * x[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, y[wp.tid()])


def gradient(mid_requires_grad):
    x = wp.array([1.0, 2.0], dtype=float, requires_grad=True)
    mid = wp.zeros(2, dtype=float, requires_grad=mid_requires_grad)  # wp.zeros defaults to False
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale, dim=2, inputs=[x], outputs=[mid])
        wp.launch(total, dim=2, inputs=[mid], outputs=[loss])
    tape.backward(loss)
    return x.grad.numpy().tolist()


x = wp.array([1.0, 2.0], dtype=float, requires_grad=True)
print(
    json.dumps(
        {
            "buggy": gradient(mid_requires_grad=False),  # no warning is printed
            "fixed": gradient(mid_requires_grad=True),
            "zeros_default": wp.zeros(2, dtype=float).requires_grad,
            "zeros_like_inherits": wp.zeros_like(x).requires_grad,
            "clone_inherits": wp.clone(x).requires_grad,
        }
    )
)
