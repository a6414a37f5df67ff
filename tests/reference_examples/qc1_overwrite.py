"""quick-checks §1: a later launch overwrites an array that an earlier launch read."""

import json

import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.config.verify_autograd_array_access = True  # must be set before this module's kernels load


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def refill(x: wp.array(dtype=float), value: float):
    i = wp.tid()
    x[i] = value


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, y[wp.tid()])


def gradient(reuse_buffer):
    x = wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    # BUG when reuse_buffer: x is refilled (next step's input) after square() read it.
    nxt = x if reuse_buffer else wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
        wp.launch(total, dim=3, inputs=[y], outputs=[loss])
        wp.launch(refill, dim=3, inputs=[nxt, 5.0])
    tape.backward(loss)
    return x.grad.numpy().tolist()


buggy = gradient(
    reuse_buffer=True
)  # the tracker prints "Warp UserWarning: ... already been read from" on stderr
fixed = gradient(reuse_buffer=False)
print(json.dumps({"buggy": buggy, "fixed": fixed, "expected": [2.0, 4.0, 6.0]}))
