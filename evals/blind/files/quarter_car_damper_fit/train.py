"""Fit the damping coefficient of each corner's damper to the body heave logged on the bump rig."""

import argparse

import numpy as np
import warp as wp

from losses import heave_loss
from vehicle.suspension import TestRig

wp.config.log_level = wp.LOG_WARNING

rig = TestRig()
true_c = np.array([2.2, 2.6, 3.1, 3.5], dtype=np.float32)
_body = rig.drive(wp.array(true_c, dtype=float))
logs = [wp.array(_body[f].numpy(), dtype=float) for f in range(9, rig.steps, 10)]
c_init = np.full(rig.n, 1.0, dtype=np.float32)


def heave_misfit(c):
    return heave_loss(rig.drive(c), logs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--lr", type=float, default=2.0)
    args = ap.parse_args()

    c_np = c_init.copy()
    for it in range(args.iters):
        c = wp.array(c_np, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            loss = heave_misfit(c)
        tape.backward(loss)
        print(f"iter {it}  heave misfit {loss.numpy()[0]:.6f}   c = {np.array2string(c_np, precision=3)}")
        c_np = c_np - args.lr * c.grad.numpy()
        tape.zero()


if __name__ == "__main__":
    main()
