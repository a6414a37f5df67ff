"""Estimate the masses of three moons from the tracked positions of a small probe (planar, G = 1)."""

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

NUM_BODIES = 4
NUM_STEPS = 100
DT = 0.01
SOFTENING = 1.0e-3


@wp.kernel
def gravity(x: wp.array(dtype=wp.vec2), mass: wp.array(dtype=float), acc: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    a = wp.vec2(0.0, 0.0)
    for j in range(4):
        if j != i:
            r = x[j] - x[i]
            d2 = wp.dot(r, r) + 1.0e-3
            a += mass[j] * r / (d2 * wp.sqrt(d2))
    acc[i] = a


@wp.kernel
def gravity_power(v: wp.array(dtype=wp.vec2), mass: wp.array(dtype=float), acc: wp.array(dtype=wp.vec2), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = mass[i] * wp.dot(acc[i], v[i])


@wp.kernel
def kick_drift(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    acc: wp.array(dtype=wp.vec2),
    dt: float,
    x_new: wp.array(dtype=wp.vec2),
    v_new: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    vel = v[i] + dt * acc[i]
    v_new[i] = vel
    x_new[i] = x[i] + dt * vel


@wp.kernel
def track_error(x: wp.array(dtype=wp.vec2), observed: wp.array(dtype=wp.vec2), weight: float, loss: wp.array(dtype=float)):
    d = x[3] - observed[0]
    wp.atomic_add(loss, 0, weight * wp.dot(d, d))


X_INIT = np.array([[0.0, 0.0], [1.0, 0.0], [-0.6, 0.8], [0.3, -0.9]], np.float32)
V_INIT = np.array([[0.0, 0.0], [0.0, 0.9], [-0.7, -0.5], [0.9, 0.2]], np.float32)


class System:
    def __init__(self):
        self.x = [wp.zeros(NUM_BODIES, dtype=wp.vec2, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.v = [wp.zeros(NUM_BODIES, dtype=wp.vec2, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.acc = [wp.zeros(NUM_BODIES, dtype=wp.vec2, requires_grad=True) for _ in range(NUM_STEPS)]
        self.power = [wp.zeros(NUM_BODIES, dtype=float, requires_grad=True) for _ in range(NUM_STEPS)]
        self.track = [wp.zeros(NUM_BODIES, dtype=wp.vec2, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def log_power(self, t: int, mass: wp.array):
        wp.launch(gravity, dim=NUM_BODIES, inputs=[self.x[t], mass], outputs=[self.acc[t]])
        wp.launch(gravity_power, dim=NUM_BODIES, inputs=[self.v[t], mass, self.acc[t]], outputs=[self.power[t]])

    def simulate(self, mass: wp.array, observed: list | None = None, every: int = 10):
        self.x[0].assign(X_INIT)
        self.v[0].assign(V_INIT)
        self.loss.zero_()
        for t in range(NUM_STEPS):
            self.log_power(t, mass)
            wp.launch(gravity, dim=NUM_BODIES, inputs=[self.x[t], mass], outputs=[self.acc[t]])
            wp.launch(
                kick_drift,
                dim=NUM_BODIES,
                inputs=[self.x[t], self.v[t], self.acc[t], DT],
                outputs=[self.x[t + 1], self.v[t + 1]],
            )
            wp.copy(self.track[t + 1], self.x[t + 1])
            if observed is not None and (t + 1) % every == 0:
                k = (t + 1) // every - 1
                wp.launch(track_error, dim=1, inputs=[self.x[t + 1], observed[k], 1.0 / len(observed)], outputs=[self.loss])
        return self.loss


SYSTEM = System()
_true_mass = wp.array(np.array([1.0, 0.05, 0.08, 1.0e-4], np.float32), dtype=float)
SYSTEM.simulate(_true_mass)
OBSERVED = [wp.clone(SYSTEM.x[t][3:4], requires_grad=False) for t in range(10, NUM_STEPS + 1, 10)]
MASS = wp.array(np.array([1.0, 0.02, 0.02, 1.0e-4], np.float32), dtype=float, requires_grad=True)


def tracking_loss(mass=MASS) -> float:
    return float(SYSTEM.simulate(mass, OBSERVED).numpy()[0])


def tracking_grad(mass=MASS) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        loss = SYSTEM.simulate(mass, OBSERVED)
    tape.backward(loss)
    return tape


if __name__ == "__main__":
    lr = 1.0
    for it in range(24):
        tape = tracking_grad()
        loss = float(SYSTEM.loss.numpy()[0])
        g = MASS.grad.numpy()
        g[0] = 0.0
        g[3] = 0.0
        MASS.assign(np.clip(MASS.numpy() - lr * g, 1.0e-4, None))
        tape.zero()
        if it % 3 == 0:
            print(f"iter {it:3d}  probe tracking error {loss:.4e}  moon masses {np.round(MASS.numpy()[1:3], 4)}")
    print("estimated moon masses:", np.round(MASS.numpy()[1:3], 4), " (sun and probe fixed)")
