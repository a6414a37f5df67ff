"""Back out the emission rates of four smoke vents from six downwind detectors."""

import argparse

import numpy as np
import warp as wp

from losses import detector_misfit
from optim import Momentum
from sim.advect import PlumeGrid

wp.config.mode = "release"

DETECTORS = np.array([[8, 8], [10, 12], [12, 6], [9, 14], [13, 10], [6, 11]], dtype=np.int32)


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=12)
    p.add_argument("--lr", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=8)
    return p.parse_args(argv)


def measurements(grid):
    true_rate = wp.array(np.array([0.9, 0.4, 0.7, 0.2], dtype=np.float32), dtype=float)
    c = grid.run(true_rate).numpy()
    return wp.array(c[DETECTORS[:, 0], DETECTORS[:, 1]], dtype=float)


class Problem:
    def __init__(self, seed):
        self.grid = PlumeGrid()
        self.detectors = wp.array(DETECTORS, dtype=wp.int32)
        self.measured = measurements(self.grid)
        rng = np.random.default_rng(seed)
        self.rate = wp.array(rng.uniform(0.2, 1.0, 4).astype(np.float32), dtype=float, requires_grad=True)

    def record(self):
        tape = wp.Tape()
        with tape:
            c = self.grid.run(self.rate)
            loss = wp.zeros(1, dtype=float, requires_grad=True)
            wp.launch(detector_misfit, len(DETECTORS), inputs=[c, self.detectors, self.measured], outputs=[loss])
        return tape, loss


def main():
    args = parse_args()
    prob = Problem(args.seed)
    opt = Momentum({"rate": prob.rate}, lr=args.lr)
    for it in range(args.iters):
        tape, loss = prob.record()
        tape.backward(loss)
        grads = opt.read_grads(tape)
        opt.apply(grads)
        print(f"iter {it:2d} detector misfit {loss.numpy()[0]:.3e}  rates {np.round(prob.rate.numpy(), 3)}")


if __name__ == "__main__":
    main()
