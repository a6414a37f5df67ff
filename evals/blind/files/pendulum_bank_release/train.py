"""Find release angles and angular velocities for a bank of pendulums so they reach a goal phase at t = 1.5 s."""

import argparse

import numpy as np
import warp as wp

from losses import end_state_loss
from optim import GradientDescent
from sim.pendulums import PendulumBank

wp.config.mode = "release"

LENGTHS = [0.4, 0.55, 0.7, 0.85, 1.0, 1.2]
GOAL = np.array([0.3, -0.2, 0.45, -0.35, 0.25, 0.1], dtype=np.float32)


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=21)
    return p.parse_args(argv)


def setup(args):
    rng = np.random.default_rng(args.seed)
    bank = PendulumBank(LENGTHS)
    theta0 = wp.array(rng.uniform(-0.5, 0.5, bank.n).astype(np.float32), dtype=float, requires_grad=True)
    omega0 = wp.array(np.zeros(bank.n, dtype=np.float32), dtype=float, requires_grad=True)
    goal = wp.array(GOAL, dtype=float)
    opt = GradientDescent({"theta0": theta0, "omega0": omega0}, lr=args.lr)
    return bank, theta0, omega0, goal, opt


def forward(bank, theta0, omega0, goal):
    tape = wp.Tape()
    with tape:
        theta, omega = bank.release(theta0, omega0)
        loss = end_state_loss(theta, omega, goal)
    return tape, loss


def main():
    args = parse_args()
    bank, theta0, omega0, goal, opt = setup(args)
    for it in range(args.iters):
        tape, loss = forward(bank, theta0, omega0, goal)
        opt.step(tape, loss)
        print(f"it {it}: phase loss {loss.numpy()[0]:.5f}  |grad| {opt.last_norm:.4f}")
    print("theta0:", np.round(theta0.numpy(), 3))


if __name__ == "__main__":
    main()
