"""quick-checks §9: length() at zero (9a), wp.where overflow and softplus (9b), floor, FD and an STE (9c)."""

import json

import warp as wp

wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def spring_length(p: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    d = p[wp.tid()]
    wp.atomic_add(loss, 0, wp.sqrt(wp.dot(d, d)))  # BUG at d == 0: the sqrt adjoint is 0.5 / sqrt(0) = inf


@wp.kernel
def spring_length_builtin(p: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, wp.length(p[wp.tid()]))  # wp.length's adjoint returns 0 at the zero vector


@wp.kernel
def capped_exp(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    v = x[wp.tid()]
    wp.atomic_add(loss, 0, wp.where(v < 20.0, wp.exp(v), 0.0))  # BUG: exp(100) = inf is still differentiated


@wp.kernel
def capped_exp_clamped(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    v = x[wp.tid()]
    wp.atomic_add(loss, 0, wp.where(v < 20.0, wp.exp(wp.min(v, 20.0)), 0.0))


@wp.func
def quantize(x: float):
    return wp.floor(x)


@wp.kernel
def quantized(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, wp.floor(x[wp.tid()]))  # zero gradient, and that is the true derivative


@wp.func_grad(quantize)
def adj_quantize(x: float, adj_ret: float):
    wp.adjoint[x] += adj_ret  # straight-through estimator: pretend d floor(x)/dx = 1


@wp.kernel
def quantized_ste(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, quantize(x[wp.tid()]))


@wp.kernel
def softplus_naive(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, wp.log(1.0 + wp.exp(x[wp.tid()])))  # exp overflows for large x


@wp.kernel
def softplus_stable(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    v = x[wp.tid()]
    wp.atomic_add(loss, 0, wp.max(v, 0.0) + wp.log(1.0 + wp.exp(-wp.abs(v))))  # same function, no overflow


def floor_fd(values, eps):
    """Central differences of sum(floor(x)): the secant of a staircase, not a derivative."""
    f = []
    for shift in (eps, -eps):
        loss = wp.zeros(1, dtype=float)
        wp.launch(
            quantized,
            dim=len(values),
            inputs=[wp.array([v + shift for v in values], dtype=float)],
            outputs=[loss],
        )
        f.append(float(loss.numpy()[0]))
    return (f[0] - f[1]) / (2 * eps)


def gradient(kernel, x):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=len(x), inputs=[x], outputs=[loss])
    tape.backward(loss)
    return x.grad.numpy().tolist()


def points():
    return wp.array([wp.vec3(0.0, 0.0, 0.0), wp.vec3(3.0, 4.0, 0.0)], dtype=wp.vec3, requires_grad=True)


def scalars(values):
    return wp.array(values, dtype=float, requires_grad=True)


print(
    json.dumps(
        {
            "length_buggy": gradient(spring_length, points()),
            "length_fixed": gradient(spring_length_builtin, points()),
            "where_buggy": gradient(capped_exp, scalars([1.0, 100.0])),
            "where_fixed": gradient(capped_exp_clamped, scalars([1.0, 100.0])),
            "floor": gradient(quantized, scalars([0.3, 1.7])),
            "floor_ste": gradient(quantized_ste, scalars([0.3, 1.7])),
            "floor_fd_near_step": floor_fd([0.3, 0.999], 1e-2),
            "softplus_naive": gradient(softplus_naive, scalars([1.0, 100.0])),
            "softplus_stable": gradient(softplus_stable, scalars([1.0, 100.0])),
        }
    )
)
