import warp as wp


@wp.func
def softplus(x: float, beta: float):
    z = beta * x
    return (wp.max(z, 0.0) + wp.log(1.0 + wp.exp(-wp.abs(z)))) / beta


@wp.func_grad(softplus)
def adj_softplus(x: float, beta: float, adj_ret: float):
    z = beta * x
    s = float(0.0)
    if z >= 0.0:
        s = 1.0 / (1.0 + wp.exp(-z))
    else:
        e = wp.exp(z)
        s = e / (1.0 + e)
    wp.adjoint[x] += adj_ret * s


@wp.kernel
def buoy_step(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    anchors: wp.array(dtype=wp.vec3),
    rest: wp.array(dtype=float),
    k_line: float,
    beta: float,
    lift: float,
    current: wp.vec3,
    c_quad: float,
    c_lin: float,
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    b = wp.tid()
    xb = x[b]
    f = wp.vec3(0.0, 0.0, lift)
    for j in range(4):
        d = xb - anchors[b * 4 + j]
        l = wp.length(d)
        tension = k_line * softplus(l - rest[b * 4 + j], beta)
        f = f - tension * d / l
    u = current - v[b]
    f = f + c_quad * wp.length(u) * u + c_lin * u
    vn = v[b] + f * dt
    v_out[b] = vn
    x_out[b] = xb + vn * dt


@wp.kernel
def station_error(x: wp.array(dtype=wp.vec3), station: wp.array(dtype=wp.vec3), w: float, loss: wp.array(dtype=float)):
    b = wp.tid()
    d = x[b] - station[b]
    wp.atomic_add(loss, 0, w * wp.dot(d, d))
