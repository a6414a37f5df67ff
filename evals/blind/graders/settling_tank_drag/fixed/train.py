"""Fit per-grain drag rates to the depths the camera saw 2 s after release (mean squared depth error)."""

import argparse

import numpy as np
import warp as wp

import losses
from sim.tank import SettlingTank

wp.config.mode = "release"


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=6)
    p.add_argument("--lr", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=13)
    return p.parse_args(argv)


def camera_depths(tank, seed):
    rng = np.random.default_rng(seed + 1)
    drag_true = rng.uniform(2.0, 6.0, tank.n).astype(np.float32)
    return wp.clone(tank.settle(wp.array(drag_true, dtype=float)))


def gradient(tank, drag_np, obs):
    drag = wp.array(drag_np, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        depth = tank.settle(drag)
        terms = losses.per_grain_error(depth, obs)
        mse = losses.mean(terms)
    tape.backward(mse)
    return mse.numpy()[0], drag.grad.numpy()


def main():
    args = parse_args()
    tank = SettlingTank()
    obs = camera_depths(tank, args.seed)
    rng = np.random.default_rng(args.seed)
    drag_np = rng.uniform(3.0, 5.0, tank.n).astype(np.float32)
    for it in range(args.iters):
        mse, g = gradient(tank, drag_np, obs)
        drag_np = drag_np - args.lr * g
        print(f"step {it}  depth mse = {mse:.6f}   drag range [{drag_np.min():.2f}, {drag_np.max():.2f}]")


if __name__ == "__main__":
    main()
