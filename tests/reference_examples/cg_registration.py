"""custom-gradients §2: signature mismatches fail at registration; wp.grad() in a plain kernel is forward-only."""

import json

import warp as wp

wp.config.log_level = wp.LOG_WARNING


@wp.func
def square(x: float):
    return x * x


registration = "accepted"
try:

    @wp.func_grad(square)
    def adj_square(x: float, y: float, adj_ret: float):  # an extra argument: does not match square(x)
        wp.adjoint[x] += 2.0 * x * adj_ret

except RuntimeError as e:
    registration = f"RuntimeError: {e}"


@wp.kernel
def slope(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.grad(square)(x[i])  # d(x*x)/dx = 2x in the forward; a constant to the backward pass


x = wp.array([3.0], dtype=float, requires_grad=True)
y = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(slope, dim=1, inputs=[x], outputs=[y])
tape.backward(grads={y: wp.ones(1, dtype=float)})
print(
    json.dumps(
        {
            "registration": registration,
            "slope_forward": y.numpy().tolist(),
            "slope_backward": x.grad.numpy().tolist(),
        }
    )
)
