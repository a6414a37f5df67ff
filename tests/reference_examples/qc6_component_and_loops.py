"""quick-checks §6: vector components assigned twice (6a) and locals mutated in a dynamic loop (6b).

`--overwrites` turns on wp.config.enable_vector_component_overwrites before the module builds.
"""

import json
import sys

import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.config.enable_vector_component_overwrites = "--overwrites" in sys.argv


@wp.kernel
def component_twice(a: wp.array(dtype=float), loss: wp.array(dtype=float)):
    v = wp.vec2(0.0, 0.0)
    v[0] = a[0]
    v[0] = 3.0 * a[0] + 3.0 * a[1]  # BUG: second assignment to the same component
    wp.atomic_add(loss, 0, v[0])


@wp.kernel
def component_once(a: wp.array(dtype=float), loss: wp.array(dtype=float)):
    v = wp.vec2(0.0, 0.0)
    v[0] = 3.0 * a[0] + 3.0 * a[1]
    wp.atomic_add(loss, 0, v[0])


@wp.kernel
def product_dynamic(x: wp.array(dtype=float), n: int, loss: wp.array(dtype=float)):
    prod = float(1.0)  # noqa: UP018 - float() declares a mutable Warp local, not a constant
    for i in range(n):  # n is a runtime value: the loop is not replayed in backward
        prod *= x[i]
    wp.atomic_add(loss, 0, prod)


@wp.func
def product_of(x: wp.array(dtype=float), n: int):
    prod = float(1.0)  # noqa: UP018 - float() declares a mutable Warp local, not a constant
    for i in range(n):
        prod *= x[i]
    return prod


@wp.kernel
def product_via_func(x: wp.array(dtype=float), n: int, loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, product_of(x, n))  # NOT a fix for a product: still wrong on 1.19


@wp.kernel
def product_static(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    prod = float(1.0)  # noqa: UP018 - float() declares a mutable Warp local, not a constant
    for i in range(3):  # a constant trip count (<= wp.config.max_unroll) is unrolled and replayed
        prod *= x[i]
    wp.atomic_add(loss, 0, prod)


@wp.kernel
def sum_then_scale(x: wp.array(dtype=float), w: wp.array(dtype=float), n: int, loss: wp.array(dtype=float)):
    s = float(0.0)  # noqa: UP018 - float() declares a mutable Warp local, not a constant
    for i in range(n):
        s = s + x[i]
    wp.atomic_add(loss, 0, s * w[0])  # x.grad comes out right, w.grad does not


def sum_gradients(n):
    x = wp.array([1.0, 2.0, 4.0], dtype=float, requires_grad=True)
    w = wp.array([3.0], dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(sum_then_scale, dim=1, inputs=[x, w, n], outputs=[loss])
    tape.backward(loss)
    return {"x": x.grad.numpy().tolist(), "w": w.grad.numpy().tolist()}


def gradient(kernel, values, extra=()):
    x = wp.array(values, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=1, inputs=[x, *extra], outputs=[loss])
    tape.backward(loss)
    return x.grad.numpy().tolist()


print(
    json.dumps(
        {
            "component_buggy": gradient(component_twice, [1.0, 2.0]),
            "component_fixed": gradient(component_once, [1.0, 2.0]),
            "component_expected": [3.0, 3.0],
            "loop_buggy": gradient(product_dynamic, [1.0, 2.0, 4.0], (3,)),
            "loop_in_func": gradient(product_via_func, [1.0, 2.0, 4.0], (3,)),
            "loop_fixed": gradient(product_static, [1.0, 2.0, 4.0]),
            "loop_expected": [8.0, 4.0, 2.0],
            "sum_then_scale": sum_gradients(3),
            "sum_then_scale_expected": {"x": [3.0, 3.0, 3.0], "w": [7.0]},
            "component_overwrites_flag": wp.config.enable_vector_component_overwrites,
        }
    )
)
