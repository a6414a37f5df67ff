import warp as wp


@wp.func
def slip_direction(v: wp.vec2, eps: float):
    return v / wp.sqrt(wp.dot(v, v) + eps * eps)


@wp.func_grad(slip_direction)
def adj_slip_direction(v: wp.vec2, eps: float, adj_ret: wp.vec2):
    s = wp.length(v)
    wp.adjoint[v] += (adj_ret - v * (wp.dot(v, adj_ret) / (s * s))) / s


@wp.kernel
def crate_step(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    push: wp.array(dtype=wp.vec2),
    push_on: float,
    mu_g: float,
    eps: float,
    dt: float,
    x_out: wp.array(dtype=wp.vec2),
    v_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    a = push[i] * push_on - mu_g * slip_direction(v[i], eps)
    vn = v[i] + a * dt
    x_out[i] = x[i] + vn * dt
    v_out[i] = vn


class Floor:
    def __init__(self, num_crates, mu=0.4, eps=0.05, dt=0.02, steps=50, push_steps=10):
        self.n = num_crates
        self.mu_g = mu * 9.81
        self.eps = eps
        self.dt = dt
        self.steps = steps
        self.push_steps = push_steps

    def slide(self, x0, push):
        x = wp.array(x0, dtype=wp.vec2, requires_grad=True)
        v = wp.zeros(self.n, dtype=wp.vec2, requires_grad=True)
        for k in range(self.steps):
            x_new = wp.zeros_like(x)
            v_new = wp.zeros_like(v)
            on = 1.0 if k < self.push_steps else 0.0
            wp.launch(crate_step, dim=self.n, inputs=[x, v, push, on, self.mu_g, self.eps, self.dt],
                      outputs=[x_new, v_new])
            x, v = x_new, v_new
        return x
