"""Reconstruct the release heights of 32 sensor pucks from their heights logged 0.1 s after release."""

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

NUM_PUCKS = 32
NUM_STEPS = 50
DT = 0.002
RADIUS = 0.02
CONTACT_K = 2.0e3
CONTACT_D = 0.0
MASS = 0.05


@wp.kernel
def step(
    y: wp.array(dtype=float),
    v: wp.array(dtype=float),
    dt: float,
    y_new: wp.array(dtype=float),
    v_new: wp.array(dtype=float),
):
    i = wp.tid()
    penetration = wp.max(0.0, RADIUS_C - y[i])
    f = CONTACT_K_C * penetration - wp.where(penetration > 0.0, CONTACT_D_C * v[i], 0.0)
    vel = v[i] + dt * (f / MASS_C - 9.81)
    v_new[i] = vel
    y_new[i] = y[i] + dt * vel


RADIUS_C = wp.constant(RADIUS)
CONTACT_K_C = wp.constant(CONTACT_K)
CONTACT_D_C = wp.constant(CONTACT_D)
MASS_C = wp.constant(MASS)


@wp.kernel
def log_error(y: wp.array(dtype=float), logged: wp.array(dtype=float), weight: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - logged[i]
    wp.atomic_add(loss, 0, weight * d * d)


class DropRig:
    def __init__(self):
        self.y = [wp.zeros(NUM_PUCKS, dtype=float, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.v = [wp.zeros(NUM_PUCKS, dtype=float, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def run(self, y0: wp.array) -> wp.array:
        wp.copy(self.y[0], y0)
        for s in range(NUM_STEPS):
            wp.launch(step, dim=NUM_PUCKS, inputs=[self.y[s], self.v[s], DT], outputs=[self.y[s + 1], self.v[s + 1]])
        return self.y[-1]

    def misfit(self, y0: wp.array, logged: wp.array) -> wp.array:
        final = self.run(y0)
        self.loss.zero_()
        wp.launch(log_error, dim=NUM_PUCKS, inputs=[final, logged, 1.0 / NUM_PUCKS], outputs=[self.loss])
        return self.loss


RIG = DropRig()
_rng = np.random.default_rng(21)
# every fourth puck was released from rest on the floor, the others were dropped from 10-30 cm
_true = (RADIUS + _rng.uniform(0.08, 0.28, NUM_PUCKS)).astype(np.float32)
_true[::4] = RADIUS
_clean = RIG.run(wp.array(_true, dtype=float)).numpy()
LOGGED = wp.array((_clean + _rng.normal(0.0, 2.0e-4, NUM_PUCKS)).astype(np.float32), dtype=float)
_guess = (_true + _rng.normal(0.0, 0.01, NUM_PUCKS)).astype(np.float32)
_guess[::4] = RADIUS
HEIGHTS = wp.array(np.maximum(_guess, RADIUS), dtype=float, requires_grad=True)


def misfit(y0=HEIGHTS) -> float:
    return float(RIG.misfit(y0, LOGGED).numpy()[0])


def misfit_grad(y0=HEIGHTS) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        loss = RIG.misfit(y0, LOGGED)
    tape.backward(loss)
    return tape


if __name__ == "__main__":
    lr = 2.0
    for it in range(30):
        tape = misfit_grad()
        loss = float(RIG.loss.numpy()[0])
        HEIGHTS.assign(np.maximum(HEIGHTS.numpy() - lr * HEIGHTS.grad.numpy(), RADIUS))
        tape.zero()
        if it % 3 == 0:
            print(f"iter {it:3d}  log misfit {loss:.4e}")
