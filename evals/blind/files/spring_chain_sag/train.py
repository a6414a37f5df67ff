"""Fit the per-link spring stiffness of a hanging chain to a recorded sag shape."""

import argparse

import numpy as np
import warp as wp

from losses import shape_loss
from sim import Chain

wp.config.mode = "release"


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--lr", type=float, default=2.0e4)
    p.add_argument("--seed", type=int, default=3)
    return p.parse_args(argv)


def recorded_shape(chain):
    k_true = np.linspace(260.0, 140.0, chain.n - 1).astype(np.float32)
    xs = chain.simulate(wp.array(k_true, dtype=float))
    return wp.clone(xs[-1])


def initial_stiffness(chain, seed):
    rng = np.random.default_rng(seed)
    return (200.0 + 30.0 * rng.standard_normal(chain.n - 1)).astype(np.float32)


def loss_and_grad(chain, k_np, target):
    k = wp.array(k_np, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        xs = chain.simulate(k)
        loss = shape_loss(xs[-1], target)
    tape.backward(loss)
    return loss.numpy()[0], k.grad.numpy()


def main():
    args = parse_args()
    chain = Chain()
    target = recorded_shape(chain)
    k_np = initial_stiffness(chain, args.seed)
    for it in range(args.iters):
        l, g = loss_and_grad(chain, k_np, target)
        k_np = k_np - args.lr * g
        print(f"iter {it:2d}  shape loss {l:.6e}  k[0]={k_np[0]:.2f}")
    print("fitted stiffness:", np.round(k_np, 1))


if __name__ == "__main__":
    main()
