"""Throw eight balls so they are at their target points after 1.2 s, bouncing on a soft floor.

Like the Newton diffsim examples, the forward and backward passes are captured once with
wp.ScopedCapture and replayed with wp.capture_launch every iteration (Warp captures CPU graphs too);
all buffers are allocated once, the initial velocities are updated in place.
"""

import numpy as np
import warp as wp

N = 8
STEPS = 120
DT = 0.01


@wp.kernel
def ball_step(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    # soft floor: a smooth penalty that grows as the ball sinks below y = 0
    h = 0.02
    depth = wp.log(1.0 + wp.exp(-x[i][1] / h)) * h
    f = wp.vec3(0.0, -9.81 + 2000.0 * depth, 0.0) - 0.3 * v[i]
    vn = v[i] + dt * f
    v_out[i] = vn
    x_out[i] = x[i] + dt * vn


@wp.kernel
def target_loss(x: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def sgd(v0: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    v0[i] = v0[i] - lr * grad[i]


class BallToss:
    def __init__(self, lr=0.02):
        rng = np.random.default_rng(2)
        self.lr = lr
        start = np.stack([np.linspace(-1.0, 1.0, N), np.full(N, 1.0), np.zeros(N)], axis=1)
        self.x = [wp.array(start.astype(np.float32), dtype=wp.vec3, requires_grad=True)]
        self.x += [wp.zeros(N, dtype=wp.vec3, requires_grad=True) for _ in range(STEPS)]
        v0 = np.stack([rng.uniform(0.5, 1.5, N), rng.uniform(1.0, 3.0, N), rng.uniform(-0.3, 0.3, N)], axis=1)
        self.v = [wp.array(v0.astype(np.float32), dtype=wp.vec3, requires_grad=True)]
        self.v += [wp.zeros(N, dtype=wp.vec3, requires_grad=True) for _ in range(STEPS)]
        tgt = start + np.stack(
            [rng.uniform(1.0, 2.0, N), rng.uniform(-0.2, 0.4, N), rng.uniform(-0.2, 0.2, N)], 1
        )
        self.target = wp.array(tgt.astype(np.float32), dtype=wp.vec3)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = wp.Tape()
        with wp.ScopedCapture(device="cpu") as capture:
            self.forward_backward()
        self.graph = capture.graph

    def forward(self):
        self.loss.zero_()
        for t in range(STEPS):
            wp.launch(ball_step, N, inputs=[self.x[t], self.v[t], DT], outputs=[self.x[t + 1], self.v[t + 1]])
        wp.launch(target_loss, N, inputs=[self.x[STEPS], self.target], outputs=[self.loss])

    def forward_backward(self):
        with self.tape:
            self.forward()
        self.tape.backward(self.loss)

    def step(self):
        wp.capture_launch(self.graph)
        value = float(self.loss.numpy()[0])
        wp.launch(sgd, N, inputs=[self.v[0], self.v[0].grad, self.lr])
        self.tape.zero()
        return value


def main():
    toss = BallToss()
    for it in range(20):
        value = toss.step()
        print(f"iter {it:2d}  target error {value:.6f}")


if __name__ == "__main__":
    main()
