"""quick-checks §5: `a[i] *= b[i]` gives a wrong gradient for b."""

import json

import warp as wp

wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def scale_in_place(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    a[i] *= b[i]  # load-op-store: the backward replay reads the already-scaled a


@wp.kernel
def scale_out_of_place(a: wp.array(dtype=float), b: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = a[i] * b[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, y[wp.tid()])


def grad_b(in_place):
    a = wp.array([1.0, 2.0], dtype=float, requires_grad=True)
    b = wp.array([3.0, 5.0], dtype=float, requires_grad=True)
    out = wp.zeros(2, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        if in_place:
            wp.launch(scale_in_place, dim=2, inputs=[a, b])
            wp.launch(total, dim=2, inputs=[a], outputs=[loss])
        else:
            wp.launch(scale_out_of_place, dim=2, inputs=[a, b], outputs=[out])
            wp.launch(total, dim=2, inputs=[out], outputs=[loss])
    tape.backward(loss)
    return b.grad.numpy().tolist()


print(json.dumps({"buggy": grad_b(True), "fixed": grad_b(False), "expected": [1.0, 2.0]}))
