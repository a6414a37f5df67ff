"""Tune the spring stiffnesses of an 8-stage vibration isolator to match a measured response of the payload."""

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

NUM_MASSES = 8
NUM_STEPS = 200
DT = 0.002
MASS = 0.1
DAMPING = 0.8
SAMPLE_EVERY = 10


@wp.func
def base_motion(t: float):
    return 0.01 * wp.sin(2.0 * 3.14159265 * 12.0 * t)


@wp.kernel
def step(
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    k: wp.array(dtype=float),
    t: float,
    dt: float,
    x_new: wp.array(dtype=float),
    v_new: wp.array(dtype=float),
):
    i = wp.tid()
    below = base_motion(t)
    if i > 0:
        below = x[i - 1]
    f = -k[i] * (x[i] - below) - DAMPING_C * v[i]
    if i < x.shape[0] - 1:
        f += k[i + 1] * (x[i + 1] - x[i])
    vel = v[i] + dt * f / MASS_C
    v_new[i] = vel
    x_new[i] = x[i] + dt * vel


DAMPING_C = wp.constant(DAMPING)
MASS_C = wp.constant(MASS)


@wp.kernel
def response_error(x: wp.array(dtype=float), measured: float, weight: float, loss: wp.array(dtype=float)):
    d = x[x.shape[0] - 1] - measured
    wp.atomic_add(loss, 0, weight * d * d)


class Isolator:
    def __init__(self):
        self.x = [wp.zeros(NUM_MASSES, dtype=float, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.v = [wp.zeros(NUM_MASSES, dtype=float, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def run(self, k: wp.array, measured: np.ndarray | None = None) -> wp.array:
        self.loss.zero_()
        samples = NUM_STEPS // SAMPLE_EVERY
        for s in range(NUM_STEPS):
            wp.launch(step, dim=NUM_MASSES, inputs=[self.x[s], self.v[s], k, s * DT, DT], outputs=[self.x[s + 1], self.v[s + 1]])
            if measured is not None and (s + 1) % SAMPLE_EVERY == 0:
                j = (s + 1) // SAMPLE_EVERY - 1
                wp.launch(response_error, dim=1, inputs=[self.x[s + 1], float(measured[j]), 1.0e4 / samples], outputs=[self.loss])
        return self.loss

    def payload_track(self) -> np.ndarray:
        return np.array([self.x[s].numpy()[-1] for s in range(SAMPLE_EVERY, NUM_STEPS + 1, SAMPLE_EVERY)])


ISOLATOR = Isolator()
_k_true = np.array([900.0, 850.0, 800.0, 820.0, 780.0, 760.0, 700.0, 650.0], np.float32)
ISOLATOR.run(wp.array(_k_true, dtype=float))
MEASURED = ISOLATOR.payload_track()
STIFFNESS = wp.array(np.full(NUM_MASSES, 600.0, np.float32), dtype=float, requires_grad=True)


def response_loss(k=STIFFNESS) -> float:
    return float(ISOLATOR.run(k, MEASURED).numpy()[0])


def response_grad(k=STIFFNESS) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        loss = ISOLATOR.run(k, MEASURED)
    tape.backward(loss)
    return tape


if __name__ == "__main__":
    lr = 3.0e7
    for it in range(30):
        tape = response_grad()
        loss = float(ISOLATOR.loss.numpy()[0])
        STIFFNESS.assign(np.maximum(STIFFNESS.numpy() - lr * STIFFNESS.grad.numpy(), 10.0))
        tape.zero()
        if it % 3 == 0:
            print(f"iter {it:3d}  response error {loss:.4e}  max k {STIFFNESS.numpy().max():.0f}")
    print("stiffness:", np.round(STIFFNESS.numpy(), 0))
