"""Choose where to hold a small spring lattice before releasing it so it lands in a target pose."""

import argparse

import numpy as np
import warp as wp

from losses import final_pose_loss
from sim.lattice import Lattice

wp.config.log_level = wp.LOG_WARNING

lattice = Lattice()
rng = np.random.default_rng(5)
target_np = lattice.rest_pos + np.array([0.15, 0.02]) + 0.01 * rng.standard_normal(lattice.rest_pos.shape)
target = wp.array(target_np, dtype=wp.vec2d)
start_np = lattice.rest_pos + np.array([0.0, 0.12])


def run(x0, with_grad=True):
    tape = wp.Tape()
    with tape:
        traj = lattice.simulate(x0)
        loss = final_pose_loss(traj, target)
    if with_grad:
        tape.backward(loss)
    return tape, loss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()

    x0_np = start_np.copy()
    for it in range(args.iters):
        x0 = wp.array(x0_np, dtype=wp.vec2d, requires_grad=True)
        tape, loss = run(x0)
        g = x0.grad.numpy()
        print(f"iter {it:2d}  landing error {loss.numpy()[0]:.6e}")
        x0_np = x0_np - args.lr * g
    x0 = wp.array(x0_np, dtype=wp.vec2d, requires_grad=True)
    _, loss = run(x0, with_grad=False)
    print(f"final landing error {loss.numpy()[0]:.6e}")


if __name__ == "__main__":
    main()
