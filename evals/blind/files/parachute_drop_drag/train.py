"""Estimate canopy drag coefficients of eight jumpers from the altimeter height loss 5 s after canopy opening."""

import argparse

import numpy as np
import warp as wp

from losses import total_loss
from sim.descent import Jumpers

wp.config.mode = "release"


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=9)
    return p.parse_args(argv)


def altimeter_log(jumpers):
    cd_true = np.array([1.35, 1.10, 1.28, 0.95, 1.42, 1.18, 1.05, 1.30], dtype=np.float32)
    jumpers.set_drag(wp.array(cd_true, dtype=float))
    return wp.clone(jumpers.drop())


def run_iteration(jumpers, cd_np, z_obs):
    cd = wp.array(cd_np, dtype=float, requires_grad=True)
    jumpers.set_drag(cd)
    tape = wp.Tape()
    with tape:
        z = jumpers.drop()
        loss = total_loss(z, z_obs, cd)
    tape.backward(loss)
    return loss.numpy()[0], cd.grad.numpy()


def main():
    args = parse_args()
    rng = np.random.default_rng(args.seed)
    jumpers = Jumpers()
    z_obs = altimeter_log(jumpers)
    cd_np = rng.uniform(0.9, 1.5, jumpers.n).astype(np.float32)
    for it in range(args.iters):
        l, g = run_iteration(jumpers, cd_np, z_obs)
        cd_np = cd_np - args.lr * g
        print(f"iter {it}: altitude misfit {l:.3f}  cd = {np.array2string(cd_np, precision=3)}")


if __name__ == "__main__":
    main()
