import numpy as np
import warp as wp


@wp.kernel
def fly(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    drag: float,
    gravity: wp.vec3,
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    vn = v[i] + dt * (gravity - drag * wp.length(v[i]) * v[i])
    v_out[i] = vn
    x_out[i] = x[i] + dt * vn


class GrainLauncher:
    """Dust grains puffed from a nozzle into still air."""

    def __init__(self, n=8, drag=0.3, dt=0.01, steps=80):
        self.n = n
        self.drag = drag
        self.dt = dt
        self.steps = steps
        self.gravity = wp.vec3(0.0, 0.0, -9.81)
        self.nozzle = wp.zeros(n, dtype=wp.vec3)

    def launch(self, v0):
        x, v = self.nozzle, v0
        for _ in range(self.steps):
            x1 = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)
            v1 = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)
            wp.launch(fly, self.n, inputs=[x, v, self.drag, self.gravity, self.dt], outputs=[x1, v1])
            x, v = x1, v1
        return x
