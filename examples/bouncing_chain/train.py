"""Fit the launch velocity of a hanging mass-spring chain so its tip reaches a target after 40 steps."""

import numpy as np
import warp as wp

NUM_PARTICLES = 16
SIM_STEPS = 40
TRAIN_ITERS = 12
DT = 1.0 / 60.0
LEARNING_RATE = 0.05


@wp.kernel
def spring_forces(
    x: wp.array(dtype=wp.vec3),
    rest: float,
    stiffness: float,
    f: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    d = x[i + 1] - x[i]
    length = wp.length(d)
    force = stiffness * (length - rest) * d / length
    wp.atomic_add(f, i, force)
    wp.atomic_sub(f, i + 1, force)


@wp.kernel
def integrate(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    f: wp.array(dtype=wp.vec3),
    dt: float,
    x_new: wp.array(dtype=wp.vec3),
    v_new: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    g = wp.vec3(0.0, -9.8, 0.0)
    vel = v[i] + (f[i] + g) * dt
    if i == 0:
        vel = wp.vec3(0.0)
    v_new[i] = vel * 0.99
    x_new[i] = x[i] + vel * dt


@wp.kernel
def kick(v0: wp.array(dtype=wp.vec3), launch: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v[i] = v0[i] + launch[0] * float(i) / float(NUM_PARTICLES)


@wp.kernel
def tip_distance(x: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    d = x[NUM_PARTICLES - 1] - target
    loss[0] = wp.dot(d, d)


class Chain:
    def __init__(self, n):
        pos = np.zeros((n, 3), dtype=np.float32)
        pos[:, 0] = np.linspace(0.0, 1.5, n)
        self.x0 = wp.array(pos, dtype=wp.vec3)
        self.v0 = wp.zeros(n, dtype=wp.vec3)
        # two state buffers, swapped every step
        self.x = [wp.zeros(n, dtype=wp.vec3, requires_grad=True) for _ in range(2)]
        self.v = [wp.zeros(n, dtype=wp.vec3, requires_grad=True) for _ in range(2)]
        self.f = [wp.zeros(n, dtype=wp.vec3, requires_grad=True) for _ in range(SIM_STEPS)]
        self.rest = 1.5 / (n - 1)


def simulate(chain, launch, loss, target):
    wp.copy(chain.x[0], chain.x0)
    wp.launch(kick, NUM_PARTICLES, inputs=[chain.v0, launch], outputs=[chain.v[0]])
    src = 0
    for step in range(SIM_STEPS):
        dst = 1 - src
        chain.f[step].zero_()
        wp.launch(spring_forces, NUM_PARTICLES - 1, inputs=[chain.x[src], chain.rest, 200.0], outputs=[chain.f[step]])
        wp.launch(
            integrate,
            NUM_PARTICLES,
            inputs=[chain.x[src], chain.v[src], chain.f[step], DT],
            outputs=[chain.x[dst], chain.v[dst]],
        )
        src = dst
    wp.launch(tip_distance, 1, inputs=[chain.x[src], target], outputs=[loss])


def main():
    chain = Chain(NUM_PARTICLES)
    target = wp.vec3(1.2, 0.4, 0.0)
    launch = wp.array([wp.vec3(0.0, 2.0, 0.0)], dtype=wp.vec3, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    for it in range(TRAIN_ITERS):
        tape = wp.Tape()
        with tape:
            simulate(chain, launch, loss, target)
        tape.backward(loss)
        g = launch.grad.numpy()
        grad_norm = np.linalg.norm(g)
        launch.assign(launch.numpy() - LEARNING_RATE * g)
        tape.zero()
        print(f"iter {it:3d}  loss {loss.numpy()[0]:.6f}  |grad| {grad_norm:.4f}")


if __name__ == "__main__":
    main()
