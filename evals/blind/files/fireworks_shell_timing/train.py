"""Tune the muzzle velocities of six fireworks shells so each bursts at its choreographed point."""

import argparse

import numpy as np
import warp as wp
import warp.optim

from show.ballistics import burst_miss, fly

wp.config.log_level = wp.LOG_WARNING

NUM_SHELLS = 6
FUSE_TIME = 2.4
DT = 0.04
K_DRAG = 0.012

rng = np.random.default_rng(8)
mortars = np.stack([np.linspace(-10, 10, NUM_SHELLS), np.zeros(NUM_SHELLS), np.zeros(NUM_SHELLS)], 1)
bursts = mortars + np.stack([rng.uniform(-6, 6, NUM_SHELLS), rng.uniform(-4, 4, NUM_SHELLS),
                             rng.uniform(35, 50, NUM_SHELLS)], 1)
initial_guess = np.tile([0.0, 0.0, 30.0], (NUM_SHELLS, 1))


class Trainer:
    def __init__(self, lr=1.0):
        self.x0 = wp.array(mortars, dtype=wp.vec3)
        self.v0 = wp.array(initial_guess, dtype=wp.vec3, requires_grad=True)
        self.burst = wp.array(bursts, dtype=wp.vec3)
        self.steps = int(round(FUSE_TIME / DT))
        self.opt = warp.optim.Adam([self.v0], lr=lr)

    def miss(self):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        x = fly(self.x0, self.v0, self.steps, DT, K_DRAG)
        wp.launch(burst_miss, dim=NUM_SHELLS, inputs=[x, self.burst], outputs=[loss])
        return loss

    def compute_gradient(self):
        self.tape = wp.Tape()
        with self.tape:
            loss = self.miss()
        self.tape.backward(loss)
        return float(loss.numpy()[0])

    def step(self):
        loss = self.compute_gradient()
        self.opt.step([self.v0.grad])
        return loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--lr", type=float, default=1.0)
    args = ap.parse_args()

    trainer = Trainer(args.lr)
    for it in range(args.iters):
        loss = trainer.step()
        print(f"iter {it:2d}  burst miss {loss:9.3f} m^2")
    print(f"final burst miss {float(trainer.miss().numpy()[0]):.3f} m^2")


if __name__ == "__main__":
    main()
