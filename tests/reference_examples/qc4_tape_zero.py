"""quick-checks §4: gradients accumulate across backward passes until tape.zero(); zero() also wipes them."""

import json

import warp as wp

wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def square_sum(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


x = wp.array([1.0], dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(square_sum, dim=1, inputs=[x], outputs=[loss])
tracked_before_backward = len(tape.gradients)  # 0: tape.zero() here would zero nothing
tape.backward(loss)
first = x.grad.numpy().tolist()
tape.backward(loss)  # BUG: a second backward without tape.zero() in between
second = x.grad.numpy().tolist()
tape.zero()
after_zero = x.grad.numpy().tolist()  # reading grads after zero() gives zeros, not the gradient
tape.backward(loss)
print(
    json.dumps(
        {
            "tracked_before_backward": tracked_before_backward,
            "first": first,
            "second_without_zero": second,
            "after_zero": after_zero,
            "after_zero_and_backward": x.grad.numpy().tolist(),
        }
    )
)
