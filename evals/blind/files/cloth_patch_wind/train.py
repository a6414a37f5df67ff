"""Fit the spring stiffnesses of a pinned cloth patch in a steady breeze to a captured drape."""

import argparse

import numpy as np
import warp as wp

from losses import drape_loss
from sim.cloth import ClothPatch

wp.config.mode = "release"


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--lr", type=float, default=3.0e5)
    p.add_argument("--seed", type=int, default=2)
    return p.parse_args(argv)


def captured_drape(cloth):
    k_true = np.full(cloth.num_springs, 40.0, dtype=np.float32)
    x = cloth.simulate(wp.array(k_true, dtype=float))
    return wp.clone(x)


def main():
    args = parse_args()
    rng = np.random.default_rng(args.seed)
    cloth = ClothPatch()
    target = captured_drape(cloth)
    k_np = rng.uniform(25.0, 55.0, cloth.num_springs).astype(np.float32)
    for it in range(args.iters):
        k = wp.array(k_np, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            x = cloth.simulate(k)
            loss = drape_loss(x, target)
        tape.backward(loss)
        k_np = np.clip(k_np - args.lr * k.grad.numpy(), 1.0, None)
        print(f"iter {it}  drape loss {loss.numpy()[0]:.4e}   mean k {k_np.mean():.2f}")


if __name__ == "__main__":
    main()
