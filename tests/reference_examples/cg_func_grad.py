"""custom-gradients §2: a wp.func_grad must accumulate (+=) into wp.adjoint, never assign (=)."""

import contextlib
import io
import json

import warp as wp
import warp.autograd

wp.config.log_level = wp.LOG_WARNING


@wp.func
def safe_sqrt(x: float):
    return wp.sqrt(x)


@wp.func_grad(safe_sqrt)
def adj_safe_sqrt(x: float, adj_ret: float):
    if x > 0.0:  # the point of the custom gradient: no inf at x == 0
        wp.adjoint[x] += adj_ret / (2.0 * wp.sqrt(x))


@wp.func
def safe_sqrt_assign(x: float):
    return wp.sqrt(x)


@wp.func_grad(safe_sqrt_assign)
def adj_safe_sqrt_assign(x: float, adj_ret: float):
    if x > 0.0:
        wp.adjoint[x] = adj_ret / (2.0 * wp.sqrt(x))  # BUG: discards what other uses of x contributed


@wp.kernel
def term_after(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    y[i] = safe_sqrt_assign(v) + 3.0 * v  # the adjoint of 3v reaches adj_v first, then "=" overwrites it


@wp.kernel
def term_before(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    y[i] = 3.0 * v + safe_sqrt_assign(v)  # same bug, hidden: here the custom adjoint happens to run first


@wp.kernel
def accumulating(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    y[i] = safe_sqrt(v) + 3.0 * v


def verify(kernel):
    """Kernel-form gradcheck: the custom adjoint against central differences (x away from the kink)."""
    x = wp.array([4.0, 9.0], dtype=float, requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    with contextlib.redirect_stdout(io.StringIO()):
        passed = warp.autograd.gradcheck(kernel, dim=2, inputs=[x], outputs=[y], raise_exception=False)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=2, inputs=[x], outputs=[y])
    tape.backward(grads={y: wp.ones(2, dtype=float)})
    return passed, x.grad.numpy().tolist()


print(
    json.dumps(
        {
            "assign_term_after": verify(term_after),
            "assign_term_before": verify(term_before),
            "accumulate": verify(accumulating),
            "expected": [3.25, 3.0 + 1.0 / 6.0],
        }
    )
)
