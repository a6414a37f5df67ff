"""Choose the friction coating of 24 sorting-chute lanes so that the peak arrival speed of parcels is low,
without paying for more coating than needed."""

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

NUM_LANES = 24
NUM_STEPS = 60
DT = 0.02
SHARPNESS = 30.0  # smooth-max temperature: close to the true maximum
COATING_COST = 2.0


@wp.kernel
def slide(
    s: wp.array(dtype=float),
    v: wp.array(dtype=float),
    slope: wp.array(dtype=float),
    mu: wp.array(dtype=float),
    dt: float,
    s_new: wp.array(dtype=float),
    v_new: wp.array(dtype=float),
):
    i = wp.tid()
    g = 9.81
    a = g * wp.sin(slope[i]) - mu[i] * g * wp.cos(slope[i]) - 0.05 * v[i] * v[i]
    vel = wp.max(v[i] + dt * a, 0.0)
    v_new[i] = vel
    s_new[i] = s[i] + dt * vel


@wp.kernel
def sum_exp(v: wp.array(dtype=float), beta: float, total: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(total, 0, wp.exp(beta * v[i]))


@wp.kernel
def peak_and_cost(
    total: wp.array(dtype=float), mu: wp.array(dtype=float), beta: float, cost: float, loss: wp.array(dtype=float)
):
    i = wp.tid()
    wp.atomic_add(loss, 0, cost * mu[i] * mu[i])
    if i == 0:
        wp.atomic_add(loss, 0, wp.log(total[0]) / beta)


class Chute:
    def __init__(self, seed: int = 13):
        rng = np.random.default_rng(seed)
        self.slope = wp.array(rng.uniform(0.35, 0.6, NUM_LANES).astype(np.float32), dtype=float)
        self.v0 = rng.uniform(0.5, 1.5, NUM_LANES).astype(np.float32)
        self.s = [wp.zeros(NUM_LANES, dtype=float, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.v = [wp.zeros(NUM_LANES, dtype=float, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.total = wp.zeros(1, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def objective(self, mu: wp.array) -> wp.array:
        self.v[0].assign(self.v0)
        for t in range(NUM_STEPS):
            wp.launch(slide, dim=NUM_LANES, inputs=[self.s[t], self.v[t], self.slope, mu, DT], outputs=[self.s[t + 1], self.v[t + 1]])
        self.loss.zero_()
        self.total.zero_()
        wp.launch(sum_exp, dim=NUM_LANES, inputs=[self.v[-1], SHARPNESS], outputs=[self.total])
        wp.launch(peak_and_cost, dim=NUM_LANES, inputs=[self.total, mu, SHARPNESS, COATING_COST], outputs=[self.loss])
        return self.loss


CHUTE = Chute()
MU = wp.array(np.full(NUM_LANES, 0.1, np.float32), dtype=float, requires_grad=True)


def chute_loss(mu=MU) -> float:
    return float(CHUTE.objective(mu).numpy()[0])


def chute_grad(mu=MU) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        loss = CHUTE.objective(mu)
    tape.backward(loss)
    return tape


if __name__ == "__main__":
    lr = 0.01
    for it in range(40):
        tape = chute_grad()
        loss = float(CHUTE.loss.numpy()[0])
        MU.assign(np.clip(MU.numpy() - lr * MU.grad.numpy(), 0.0, 1.0))
        tape.zero()
        if it % 4 == 0:
            print(f"iter {it:3d}  objective {loss:.4f}  peak speed {CHUTE.v[-1].numpy().max():.3f} m/s")
