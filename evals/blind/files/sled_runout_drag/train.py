"""Calibrate sled runout coefficients (entry speed, smoothing floor, air drag) from the stop positions
logged by the timing gates. Run: python train.py [--iters N]"""

import argparse

import numpy as np
import warp as wp

import losses
from sim.runout import Runout

wp.config.mode = "release"

STOPS = np.array([38.1, -33.6, 44.0, 29.7, -40.2], dtype=np.float32)


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=6)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args(argv)


def first_guess(seed):
    rng = np.random.default_rng(seed)
    n = len(STOPS)
    return np.stack(
        [np.sign(STOPS) * rng.uniform(14.0, 16.0, n), rng.uniform(0.04, 0.06, n), rng.uniform(0.003, 0.005, n)],
        axis=1,
    ).astype(np.float32)


def evaluate(runout, coeffs, stops):
    x = runout.slide(coeffs)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(losses.sq_dist, runout.n, inputs=[x, stops], outputs=[loss])
    return loss


def main():
    args = parse_args()
    runout = Runout()
    stops = wp.array(STOPS, dtype=float)
    c_np = first_guess(args.seed)
    # the three coefficients live on very different scales
    scale = np.array([1.0, 2e-1, 1e-5], dtype=np.float32)
    for it in range(args.iters):
        coeffs = wp.array(c_np, dtype=wp.vec3, requires_grad=True)
        tape = wp.Tape()
        with tape:
            loss = evaluate(runout, coeffs, stops)
        tape.backward(loss)
        c_np = c_np - args.lr * scale * coeffs.grad.numpy()
        c_np[:, 1] = np.maximum(c_np[:, 1], 0.01)
        print(f"{it}: runout misfit {loss.numpy()[0]:.4f}")
    print(c_np)


if __name__ == "__main__":
    main()
