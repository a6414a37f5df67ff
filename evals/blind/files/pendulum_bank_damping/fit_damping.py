"""Identify the bearing damping of each pendulum in the test rig from the encoder angles."""

import argparse

import numpy as np
import warp as wp

from losses import encoder_loss
from rig.pendulums import PendulumBank

wp.config.log_level = wp.LOG_WARNING

EVERY = 5

rng = np.random.default_rng(0)
lengths = rng.uniform(0.3, 0.8, 10)
bank = PendulumBank(lengths, theta0=rng.uniform(0.4, 1.2, 10))
true_damping = rng.uniform(0.2, 1.5, 10).astype(np.float32)
_hist = bank.run(wp.array(true_damping, dtype=float))
measurements = [wp.array(_hist[f].numpy(), dtype=float) for f in range(EVERY, len(_hist), EVERY)]

damping = wp.array(np.full(10, 0.8, dtype=np.float32), dtype=float, requires_grad=True)


@wp.kernel
def sgd_update(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float, lo: float):
    i = wp.tid()
    p[i] = wp.max(p[i] - lr * g[i], lo)


def loss_only(c=damping):
    return float(encoder_loss(bank.run(c), measurements, EVERY).numpy()[0])


def backward(c=damping):
    tape = wp.Tape()
    with tape:
        loss = encoder_loss(bank.run(c), measurements, EVERY)
    tape.backward(loss)
    return tape, float(loss.numpy()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--lr", type=float, default=100.0)
    args = ap.parse_args()
    for it in range(args.iters):
        tape, loss = backward(damping)
        wp.launch(sgd_update, dim=bank.n, inputs=[damping, damping.grad, args.lr, 0.0])
        tape.zero()
        err = np.abs(damping.numpy() - true_damping).max()
        print(f"iter {it:2d}  encoder rms {np.sqrt(loss):.5f} rad   max damping error {err:.4f}")
    print(f"final encoder rms {np.sqrt(loss_only()):.5f} rad")


if __name__ == "__main__":
    main()
