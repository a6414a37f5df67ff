"""Identify the per-step velocity retention of a bank of tuned-mass dampers from
their recorded free-decay responses (one accelerometer-derived trace per damper)."""

import numpy as np
import warp as wp

NUM_DAMPERS = 16
STEPS = 50
DT = 0.05


@wp.kernel
def accelerate(
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    stiffness: wp.array(dtype=float),
    dt: float,
    v_out: wp.array(dtype=float),
):
    i = wp.tid()
    v_out[i] = v[i] - stiffness[i] * x[i] * dt


@wp.kernel
def apply_damping(v: wp.array(dtype=float), retention: wp.array(dtype=float)):
    i = wp.tid()
    v[i] *= retention[i]


@wp.kernel
def drift(x: wp.array(dtype=float), v: wp.array(dtype=float), dt: float, x_out: wp.array(dtype=float)):
    i = wp.tid()
    x_out[i] = x[i] + v[i] * dt


@wp.kernel
def trace_error(x: wp.array(dtype=float), recorded: wp.array(dtype=float, ndim=2), t: int, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - recorded[t, i]
    wp.atomic_add(loss, 0, d * d)


class DamperBank:
    def __init__(self, seed=2):
        rng = np.random.default_rng(seed)
        self.stiffness = wp.array(rng.uniform(20.0, 60.0, NUM_DAMPERS).astype(np.float32), dtype=float)
        self.retention = wp.array(rng.uniform(0.8, 0.95, NUM_DAMPERS).astype(np.float32), requires_grad=True)
        self.x = [wp.zeros(NUM_DAMPERS, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
        self.v = [wp.zeros(NUM_DAMPERS, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
        self.x[0].fill_(0.1)
        self.recorded = wp.zeros((STEPS + 1, NUM_DAMPERS), dtype=float)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.true_retention = rng.uniform(0.7, 0.95, NUM_DAMPERS).astype(np.float32)

    def simulate(self, record=False):
        for t in range(STEPS):
            wp.launch(accelerate, dim=NUM_DAMPERS, inputs=[self.x[t], self.v[t], self.stiffness, DT], outputs=[self.v[t + 1]])
            wp.launch(apply_damping, dim=NUM_DAMPERS, inputs=[self.v[t + 1], self.retention])
            wp.launch(drift, dim=NUM_DAMPERS, inputs=[self.x[t], self.v[t + 1], DT], outputs=[self.x[t + 1]])
            if record:
                wp.launch(trace_error, dim=NUM_DAMPERS, inputs=[self.x[t + 1], self.recorded, t + 1], outputs=[self.loss])

    def forward(self):
        self.loss.zero_()
        self.simulate(record=True)
        return self.loss

    def load_recordings(self):
        guess = self.retention.numpy().copy()
        self.retention.assign(self.true_retention)
        self.simulate()
        self.recorded.assign(np.stack([x.numpy() for x in self.x]))
        self.retention.assign(guess)


def main():
    wp.init()
    bank = DamperBank()
    bank.load_recordings()
    lr = 0.05
    for it in range(40):
        tape = wp.Tape()
        with tape:
            bank.forward()
        tape.backward(bank.loss)
        bank.retention.assign(np.clip(bank.retention.numpy() - lr * bank.retention.grad.numpy(), 0.0, 1.0))
        tape.zero()
        print(f"iter {it:2d}  trace misfit {bank.loss.numpy()[0]:.6e}")
    err = np.abs(bank.retention.numpy() - bank.true_retention)
    print(f"retention error: mean {err.mean():.4f} max {err.max():.4f}")


if __name__ == "__main__":
    main()
