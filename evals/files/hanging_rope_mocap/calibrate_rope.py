"""Calibrate per-segment stiffness of a hanging rope from a motion-capture snapshot."""

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

NUM_NODES = 16
NUM_STEPS = 60
DT = 0.01
MASS = 0.05
DAMPING = 0.4
REST = 0.1


@wp.func
def stable_length(v: wp.vec3):
    return wp.length(v)


@wp.func_grad(stable_length)
def adj_stable_length(v: wp.vec3, adj_ret: float):
    l = wp.length(v)
    if l > 1.0e-6:
        wp.adjoint[v] = v * (adj_ret / l)


@wp.kernel
def spring_forces(
    x: wp.array(dtype=wp.vec3), stiffness: wp.array(dtype=float), rest: float, f: wp.array(dtype=wp.vec3)
):
    s = wp.tid()
    d = x[s + 1] - x[s]
    l = stable_length(d)
    fs = stiffness[s] * (l - rest) * d / l
    wp.atomic_add(f, s, fs)
    wp.atomic_sub(f, s + 1, fs)


@wp.kernel
def integrate(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    f: wp.array(dtype=wp.vec3),
    mass: float,
    damping: float,
    dt: float,
    x_new: wp.array(dtype=wp.vec3),
    v_new: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    if i == 0:
        x_new[i] = x[i]
        v_new[i] = wp.vec3(0.0)
        return
    a = f[i] / mass + wp.vec3(0.0, -9.81, 0.0) - damping * v[i]
    vel = v[i] + dt * a
    v_new[i] = vel
    x_new[i] = x[i] + dt * vel


@wp.kernel
def capture_error(x: wp.array(dtype=wp.vec3), observed: wp.array(dtype=wp.vec3), weight: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - observed[i]
    wp.atomic_add(loss, 0, weight * wp.dot(d, d))


class Rope:
    def __init__(self):
        self.x = [wp.zeros(NUM_NODES, dtype=wp.vec3, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.v = [wp.zeros(NUM_NODES, dtype=wp.vec3, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.f = [wp.zeros(NUM_NODES, dtype=wp.vec3, requires_grad=True) for _ in range(NUM_STEPS)]
        x0 = np.zeros((NUM_NODES, 3), np.float32)
        x0[:, 0] = REST * np.arange(NUM_NODES)
        self.x0 = x0
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def simulate(self, stiffness: wp.array) -> wp.array:
        self.x[0].assign(self.x0)
        self.v[0].zero_()
        for t in range(NUM_STEPS):
            self.f[t].zero_()
            wp.launch(spring_forces, dim=NUM_NODES - 1, inputs=[self.x[t], stiffness, REST], outputs=[self.f[t]])
            wp.launch(
                integrate,
                dim=NUM_NODES,
                inputs=[self.x[t], self.v[t], self.f[t], MASS, DAMPING, DT],
                outputs=[self.x[t + 1], self.v[t + 1]],
            )
        return self.x[-1]

    def error(self, stiffness: wp.array, observed: wp.array) -> wp.array:
        final = self.simulate(stiffness)
        self.loss.zero_()
        wp.launch(capture_error, dim=NUM_NODES, inputs=[final, observed, 1.0 / NUM_NODES], outputs=[self.loss])
        return self.loss


ROPE = Rope()
_true_k = np.linspace(60.0, 30.0, NUM_NODES - 1).astype(np.float32)
OBSERVED = wp.clone(ROPE.simulate(wp.array(_true_k, dtype=float)), requires_grad=False)
STIFFNESS = wp.array(np.full(NUM_NODES - 1, 45.0, np.float32), dtype=float, requires_grad=True)


def capture_loss(stiffness=STIFFNESS) -> float:
    return float(ROPE.error(stiffness, OBSERVED).numpy()[0])


def capture_grad(stiffness=STIFFNESS) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        loss = ROPE.error(stiffness, OBSERVED)
    tape.backward(loss)
    return tape


if __name__ == "__main__":
    lr = 2.0e5
    for it in range(40):
        tape = capture_grad(STIFFNESS)
        loss = float(ROPE.loss.numpy()[0])
        k = STIFFNESS.numpy() - lr * STIFFNESS.grad.numpy()
        STIFFNESS.assign(np.clip(k, 1.0, None))
        tape.zero()
        if it % 4 == 0:
            print(f"iter {it:3d}  capture error {loss:.4e}")
    print("stiffness:", np.round(STIFFNESS.numpy(), 1))
