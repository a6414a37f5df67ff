import warp as wp


@wp.kernel
def shell_step(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    k_drag: float,
    gravity: wp.vec3,
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    vi = v[i]
    a = gravity - k_drag * wp.length(vi) * vi
    vn = vi + a * dt
    v_out[i] = vn
    x_out[i] = x[i] + vn * dt


@wp.kernel
def burst_miss(x: wp.array(dtype=wp.vec3), burst: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - burst[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


def fly(x0, v0, steps, dt, k_drag, gravity=wp.vec3(0.0, 0.0, -9.81)):
    x = x0
    v = v0
    for _ in range(steps):
        xn = wp.zeros_like(x0, requires_grad=True)
        vn = wp.zeros_like(v0, requires_grad=True)
        wp.launch(shell_step, dim=len(x0), inputs=[x, v, k_drag, gravity, dt], outputs=[xn, vn])
        x, v = xn, vn
    return x
