"""quick-checks §1.3 version caveat: the adjoint of a recorded wp.copy before and after Warp 1.17."""

import inspect
import json

import warp as wp
import warp.autograd

wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def double(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


@wp.kernel
def combine(
    y: wp.array(dtype=float), z: wp.array(dtype=float), wy: float, wz: float, loss: wp.array(dtype=float)
):
    i = wp.tid()
    wp.atomic_add(loss, 0, wy * y[i] + wz * z[i])


def gradient(wy, wz):
    """loss = wy * y + wz * copy(y) with y = 2x, so d loss / dx = 2 * (wy + wz)."""
    x = wp.array([1.0], dtype=float, requires_grad=True)
    y = wp.zeros(1, dtype=float, requires_grad=True)
    z = wp.zeros(1, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(double, dim=1, inputs=[x], outputs=[y])
        wp.copy(z, y)  # y has another reader below: the copy is not its last consumer
        wp.launch(combine, dim=1, inputs=[y, z, wy, wz], outputs=[loss])
    tape.backward(loss)
    return float(x.grad.numpy()[0])


print(
    json.dumps(
        {
            "warp": wp.__version__,
            "copy_and_reader": gradient(1.0, 3.0),  # expected 8
            "copy_unused": gradient(3.0, 0.0),  # expected 6
            "gradcheck_has_restore_inputs": "restore_inputs"
            in inspect.signature(warp.autograd.gradcheck).parameters,
        }
    )
)
