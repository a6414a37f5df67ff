"""Tune drive amplitude and damping of an oscillator bank so that every oscillator ends at x_T = 1."""

import argparse

import numpy as np
import warp as wp

import losses
from sim.oscillators import OscillatorBank

wp.config.mode = "release"
TARGET = 1.0


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=12)
    p.add_argument("--lr", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=11)
    return p.parse_args(argv)


def objective(bank, damping, amp):
    x_T = bank.simulate(damping, amp)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(losses.final_offset, bank.n, inputs=[x_T, TARGET], outputs=[loss])
    wp.launch(losses.damping_prior, bank.n, inputs=[damping, 0.5, 0.1], outputs=[loss])
    return x_T, loss


def main():
    args = parse_args()
    rng = np.random.default_rng(args.seed)
    bank = OscillatorBank()
    c_np = rng.uniform(0.3, 0.8, bank.n).astype(np.float32)
    a_np = rng.uniform(5.0, 10.0, bank.n).astype(np.float32)

    for it in range(args.iters):
        damping = wp.array(c_np, dtype=float, requires_grad=True)
        amp = wp.array(a_np, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            x_T, loss = objective(bank, damping, amp)
        tape.backward(loss)
        print(f"it {it:2d}  x_T = {x_T.numpy().mean():+.5f}  (spread {x_T.numpy().std():.4f})")
        c_np = c_np - args.lr * damping.grad.numpy()
        a_np = a_np - args.lr * amp.grad.numpy()


if __name__ == "__main__":
    main()
