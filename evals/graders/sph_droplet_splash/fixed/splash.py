"""Recover the initial velocity field of a 2D SPH droplet from a high-speed camera frame."""

import numpy as np
import warp as wp

SIDE = 6
N = SIDE * SIDE
STEPS = 30
DT = 0.004
H = 0.25
MASS = 0.01
STIFFNESS = 2.0
REST_DENSITY = 0.05


@wp.func
def kernel_weight(r: float, h: float):
    q = 1.0 - r / h
    return q * q * q


@wp.kernel
def compute_density(x: wp.array(dtype=wp.vec2), h: float, mass: float, rho: wp.array(dtype=float)):
    i, j = wp.tid()
    if i == j:
        wp.atomic_add(rho, i, mass)
        return
    d = x[i] - x[j]
    r = wp.sqrt(wp.dot(d, d))
    if r < h:
        wp.atomic_add(rho, i, mass * kernel_weight(r, h))


@wp.kernel
def compute_forces(
    x: wp.array(dtype=wp.vec2),
    rho: wp.array(dtype=float),
    h: float,
    mass: float,
    stiffness: float,
    rest_density: float,
    f: wp.array(dtype=wp.vec2),
):
    i, j = wp.tid()
    if i == j:
        return
    d = x[i] - x[j]
    r = wp.sqrt(wp.dot(d, d))
    if r < h:
        p_i = stiffness * (rho[i] - rest_density)
        p_j = stiffness * (rho[j] - rest_density)
        q = 1.0 - r / h
        grad_w = -3.0 * q * q / h
        wp.atomic_sub(f, i, mass * (p_i + p_j) / (2.0 * rho[j]) * grad_w * wp.normalize(d))


@wp.kernel
def integrate(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    f: wp.array(dtype=wp.vec2),
    rho: wp.array(dtype=float),
    dt: float,
    x_out: wp.array(dtype=wp.vec2),
    v_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    vel = v[i] + f[i] / rho[i] * dt
    v_out[i] = vel
    x_out[i] = x[i] + vel * dt


@wp.kernel
def frame_error(x: wp.array(dtype=wp.vec2), frame: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - frame[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


class Droplet:
    def __init__(self):
        g = (np.arange(SIDE) - (SIDE - 1) / 2.0) * 0.1
        grid = np.stack(np.meshgrid(g, g), axis=-1).reshape(-1, 2).astype(np.float32)
        self.v0 = wp.zeros(N, dtype=wp.vec2, requires_grad=True)
        self.x = [wp.zeros(N, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS + 1)]
        self.v = [wp.zeros(N, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS)]
        self.rho = [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS)]
        self.f = [wp.zeros(N, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS)]
        self.x[0].assign(grid)
        self.frame = wp.zeros(N, dtype=wp.vec2)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def simulate(self):
        vel = self.v0
        for t in range(STEPS):
            self.rho[t].zero_()
            self.f[t].zero_()
            wp.launch(compute_density, dim=(N, N), inputs=[self.x[t], H, MASS], outputs=[self.rho[t]])
            wp.launch(
                compute_forces,
                dim=(N, N),
                inputs=[self.x[t], self.rho[t], H, MASS, STIFFNESS, REST_DENSITY],
                outputs=[self.f[t]],
            )
            wp.launch(
                integrate,
                dim=N,
                inputs=[self.x[t], vel, self.f[t], self.rho[t], DT],
                outputs=[self.x[t + 1], self.v[t]],
            )
            vel = self.v[t]
        return self.x[STEPS]

    def forward(self):
        self.loss.zero_()
        wp.launch(frame_error, dim=N, inputs=[self.simulate(), self.frame], outputs=[self.loss])
        return self.loss

    def capture_frame(self, seed=9):
        rng = np.random.default_rng(seed)
        swirl = self.x[0].numpy()[:, ::-1] * np.array([-1.0, 1.0], dtype=np.float32) * 4.0
        self.v0.assign(swirl + rng.normal(0.0, 0.3, (N, 2)).astype(np.float32))
        self.frame.assign(self.simulate().numpy())
        self.v0.zero_()


def main():
    wp.init()
    drop = Droplet()
    drop.capture_frame()
    lr = 10.0
    for it in range(30):
        tape = wp.Tape()
        with tape:
            drop.forward()
        tape.backward(drop.loss)
        drop.v0.assign(drop.v0.numpy() - lr * drop.v0.grad.numpy())
        tape.zero()
        print(f"iter {it:2d}  frame error {drop.loss.numpy()[0]:.6f}")


if __name__ == "__main__":
    main()
