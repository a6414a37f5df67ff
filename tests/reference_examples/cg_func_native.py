"""custom-gradients §4: a wp.func_native needs an adjoint snippet, and gradcheck verifies it."""

import contextlib
import io
import json

import warp as wp
import warp.autograd

wp.config.log_level = wp.LOG_WARNING


@wp.func_native("return x * x * x;", "adj_x += 3.0f * x * x * adj_ret;")
def cube(x: float) -> float: ...


@wp.func_native("return x * x * x;", "adj_x += 2.0f * x * adj_ret;")  # BUG: derivative of x^2, not x^3
def cube_bad_adjoint(x: float) -> float: ...


@wp.kernel
def apply_cube(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = cube(x[i])


@wp.kernel
def apply_cube_bad(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = cube_bad_adjoint(x[i])


def gradcheck(kernel):
    x = wp.array([1.0, 2.0], dtype=float, requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    with contextlib.redirect_stdout(io.StringIO()):
        return warp.autograd.gradcheck(kernel, dim=2, inputs=[x], outputs=[y], raise_exception=False)


print(json.dumps({"correct_adjoint": gradcheck(apply_cube), "bad_adjoint": gradcheck(apply_cube_bad)}))
