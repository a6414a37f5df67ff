"""Aim four mortar shots with air drag at their targets by optimizing the launch velocities."""

import numpy as np
import warp as wp

NUM_SHOTS = 4
NUM_STEPS = 80
DT = 0.03
LEARNING_RATE = 0.02


@wp.kernel
def flight_step(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    drag: wp.array(dtype=float),
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    vel = v[i]
    speed = wp.length(vel)
    acc = wp.vec3(0.0, -9.81, 0.0) - drag[i] * speed * vel
    v_new = vel + acc * dt
    v_out[i] = v_new
    x_out[i] = x[i] + v_new * dt


@wp.kernel
def miss_distance(x: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def gradient_step(v0: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    v0[i] = v0[i] - lr * grad[i]


class Battery:
    def __init__(self):
        rng = np.random.default_rng(3)
        self.drag = wp.array(rng.uniform(0.01, 0.05, NUM_SHOTS).astype(np.float32), dtype=float)
        guess = np.tile(np.array([8.0, 10.0, 0.0], dtype=np.float32), (NUM_SHOTS, 1))
        self.v0 = wp.array(guess, dtype=wp.vec3, requires_grad=True)
        self.targets = wp.array(
            np.array([[14.0, 1.0, 2.0], [18.0, -1.0, -3.0], [11.0, 0.5, 0.0], [16.0, 2.0, 4.0]], dtype=np.float32),
            dtype=wp.vec3,
        )
        self.x = [wp.zeros(NUM_SHOTS, dtype=wp.vec3, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.v = [wp.zeros(NUM_SHOTS, dtype=wp.vec3, requires_grad=True) for _ in range(NUM_STEPS)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.tape = wp.Tape()

    def forward(self):
        self.loss.zero_()
        v = self.v0
        for t in range(NUM_STEPS):
            v_next = self.v[t]
            wp.launch(
                flight_step,
                dim=NUM_SHOTS,
                inputs=[self.x[t], v, self.drag, DT],
                outputs=[self.x[t + 1], v_next],
            )
            v = v_next
        wp.launch(miss_distance, dim=NUM_SHOTS, inputs=[self.x[NUM_STEPS], self.targets], outputs=[self.loss])
        return self.loss

    def gradient(self):
        self.tape.reset()
        with self.tape:
            self.forward()
        self.tape.backward(self.loss)
        return self.v0.grad


battery = Battery()

if __name__ == "__main__":
    for it in range(30):
        grad = battery.gradient()
        wp.launch(gradient_step, dim=NUM_SHOTS, inputs=[battery.v0, grad, LEARNING_RATE])
        miss = battery.forward().numpy()[0]
        print(f"iter {it:2d}  total squared miss {miss:10.4f} m^2")
    print("launch velocities:")
    print(battery.v0.numpy())
