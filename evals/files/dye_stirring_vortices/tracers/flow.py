import warp as wp

from .pool import StatePool


@wp.func
def vortex_velocity(p: wp.vec2, center: wp.vec2, strength: float):
    r = p - center
    r2 = wp.dot(r, r) + 0.05
    return strength * wp.vec2(-r[1], r[0]) / r2


@wp.kernel
def advect(
    x: wp.array(dtype=wp.vec2),
    centers: wp.array(dtype=wp.vec2),
    strengths: wp.array(dtype=float),
    dt: float,
    x_new: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    p = x[i]
    u = wp.vec2(0.0, 0.0)
    for k in range(4):
        u += vortex_velocity(p, centers[k], strengths[k])
    x_new[i] = p + dt * u


@wp.kernel
def landing_error(
    x: wp.array(dtype=wp.vec2), target: wp.array(dtype=wp.vec2), weight: float, loss: wp.array(dtype=float)
):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, weight * wp.dot(d, d))


class VortexFlow:
    def __init__(self, num_tracers: int, horizon: int, max_buffers: int, dt: float):
        self.n = num_tracers
        self.horizon = horizon
        self.dt = dt
        self.pool = StatePool(num_tracers, horizon, max_buffers)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def rollout(self, x0: wp.array, centers: wp.array, strengths: wp.array) -> wp.array:
        wp.copy(self.pool[0], x0)
        for t in range(self.horizon):
            wp.launch(advect, dim=self.n, inputs=[self.pool[t], centers, strengths, self.dt], outputs=[self.pool[t + 1]])
        return self.pool[self.horizon]

    def objective(self, x0, centers, strengths, target) -> wp.array:
        final = self.rollout(x0, centers, strengths)
        self.loss.zero_()
        wp.launch(landing_error, dim=self.n, inputs=[final, target, 1.0 / self.n], outputs=[self.loss])
        return self.loss
