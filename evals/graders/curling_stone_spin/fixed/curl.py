"""Plan launch velocities (vx, vy, spin) for curling stones so they stop on their marks.

Each stone is a 2D rigid body with state (x, y, heading). Ice friction slows translation, and the
spin makes the stone curl sideways.
"""

import numpy as np
import warp as wp

NUM_STONES = 8
STEPS = 80
DT = 0.05
CURL = 0.08


@wp.kernel
def slide(
    q: wp.array(dtype=wp.vec3),
    qd: wp.array(dtype=wp.vec3),
    mu: wp.array(dtype=float),
    dt: float,
    curl: float,
    q_out: wp.array(dtype=wp.vec3),
    qd_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    s = q[i]
    vel = qd[i]
    speed = wp.sqrt(vel[0] * vel[0] + vel[1] * vel[1] + 1.0e-4)
    decel = mu[i] * 9.81 / (speed + 0.5)
    lateral = curl * vel[2] / (speed + 1.0)
    ax = -decel * vel[0] - lateral * vel[1]
    ay = -decel * vel[1] + lateral * vel[0]
    new_vel = wp.vec3(vel[0] + ax * dt, vel[1] + ay * dt, vel[2] * (1.0 - 0.4 * dt))
    q_out[i] = s + new_vel * dt
    qd_out[i] = new_vel


@wp.kernel
def placement_error(
    q: wp.array(dtype=wp.vec3),
    qd: wp.array(dtype=wp.vec3),
    marks: wp.array(dtype=wp.vec3),
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    s = q[i]
    m = marks[i]
    err = wp.vec3()
    err[0] = s[0] - m[0]
    err[1] = s[1] - m[1]
    dh = s[2] - m[2]
    err[2] = wp.atan2(wp.sin(dh), wp.cos(dh))
    v = qd[i]
    still = v[0] * v[0] + v[1] * v[1]
    wp.atomic_add(loss, 0, wp.dot(err, err) + still)


class Sheet:
    def __init__(self, seed=4):
        rng = np.random.default_rng(seed)
        self.mu = wp.array(rng.uniform(0.01, 0.02, NUM_STONES).astype(np.float32), dtype=float)
        launch = np.zeros((NUM_STONES, 3), dtype=np.float32)
        launch[:, 0] = 2.0
        launch[:, 2] = 1.0
        self.qd0 = wp.array(launch, dtype=wp.vec3, requires_grad=True)
        self.q = [wp.zeros(NUM_STONES, dtype=wp.vec3, requires_grad=True) for _ in range(STEPS + 1)]
        self.qd = [wp.zeros(NUM_STONES, dtype=wp.vec3, requires_grad=True) for _ in range(STEPS)]
        start = np.zeros((NUM_STONES, 3), dtype=np.float32)
        start[:, 1] = np.linspace(-1.5, 1.5, NUM_STONES)
        self.q[0].assign(start)
        marks = start.copy()
        marks[:, 0] = rng.uniform(5.0, 7.0, NUM_STONES)
        marks[:, 1] += rng.uniform(-0.5, 0.5, NUM_STONES)
        marks[:, 2] = rng.uniform(-2.5, 2.5, NUM_STONES)
        self.marks = wp.array(marks, dtype=wp.vec3)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def forward(self):
        self.loss.zero_()
        vel = self.qd0
        for t in range(STEPS):
            wp.launch(
                slide,
                dim=NUM_STONES,
                inputs=[self.q[t], vel, self.mu, DT, CURL],
                outputs=[self.q[t + 1], self.qd[t]],
            )
            vel = self.qd[t]
        wp.launch(placement_error, dim=NUM_STONES, inputs=[self.q[STEPS], self.qd[STEPS - 1], self.marks], outputs=[self.loss])
        return self.loss


def main():
    wp.init()
    sheet = Sheet()
    lr = 0.05
    for it in range(40):
        tape = wp.Tape()
        with tape:
            sheet.forward()
        tape.backward(sheet.loss)
        sheet.qd0.assign(sheet.qd0.numpy() - lr * sheet.qd0.grad.numpy())
        tape.zero()
        print(f"iter {it:2d}  placement error {sheet.loss.numpy()[0]:.5f}")


if __name__ == "__main__":
    main()
