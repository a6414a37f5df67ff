"""Identify per-shot launch speed, friction smoothing speed and friction coefficient of ice pucks
from where they came to rest."""

import argparse

import numpy as np
import warp as wp

from losses import stopping_loss
from sim import PuckRink

wp.config.mode = "release"

# resting marks measured on the rink [m] (negative: shot to the left)
MARKS = np.array([35.8, -30.2, 41.5, -37.9, 28.4, 33.0], dtype=np.float32)


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--lr", type=float, nargs=3, default=[2.0e-3, 2.0e-6, 2.0e-6])
    p.add_argument("--seed", type=int, default=5)
    return p.parse_args(argv)


def initial_shots(n, seed):
    rng = np.random.default_rng(seed)
    sign = np.sign(MARKS[:n])
    speed = sign * rng.uniform(14.0, 16.0, n)
    smooth = rng.uniform(0.04, 0.06, n)
    mu = rng.uniform(0.28, 0.32, n)
    return np.stack([speed, smooth, mu], axis=1).astype(np.float32)


def loss_and_grad(rink, shots_np, marks):
    shots = wp.array(shots_np, dtype=wp.vec3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        x = rink.run(shots)
        loss = stopping_loss(x, marks)
    tape.backward(loss)
    return loss.numpy()[0], shots.grad.numpy(), x.numpy()


def main():
    args = parse_args()
    rink = PuckRink()
    marks = wp.array(MARKS, dtype=float)
    shots_np = initial_shots(rink.n, args.seed)
    lr = np.array(args.lr, dtype=np.float32)
    for it in range(args.iters):
        l, g, x = loss_and_grad(rink, shots_np, marks)
        shots_np = shots_np - lr * g
        print(f"iter {it}: stop error {l:9.4f} m^2   puck0 at {x[0]:+7.3f} m")
    print("shots (speed, smoothing, mu):")
    print(np.round(shots_np, 4))


if __name__ == "__main__":
    main()
