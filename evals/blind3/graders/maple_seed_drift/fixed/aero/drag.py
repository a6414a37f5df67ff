"""Quadratic air drag with a hand-written adjoint.

The autodiff adjoint of wp.length is guarded at zero, but seeds are released at rest in some
experiments, so the drag force gets its own adjoint that is safe at v = 0.
"""

import warp as wp


@wp.func
def drag_force(v: wp.vec2, c: float):
    return -c * wp.length(v) * v


@wp.func_grad(drag_force)
def adj_drag_force(v: wp.vec2, c: float, adj_ret: wp.vec2):
    s = wp.length(v)
    # d/dc (-c |v| v) = -|v| v
    wp.adjoint[c] += -s * wp.dot(v, adj_ret)
    # d/dv (-c |v| v)
    if s > 1.0e-6:
        wp.adjoint[v] += -c * (s * adj_ret + wp.dot(v, adj_ret) / s * v)
