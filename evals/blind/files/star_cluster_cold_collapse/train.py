"""Recover the initial positions of a collapsing star cluster from three snapshots."""

import argparse

import numpy as np
import warp as wp

from losses import fit_loss
from nbody.cluster import ClusterSim

wp.config.log_level = wp.LOG_WARNING

STEPS = 60
FRAMES = [20, 40, 60]

rng = np.random.default_rng(2024)
masses = rng.uniform(0.5, 1.5, 6)
sim = ClusterSim(masses)

true_x0 = rng.uniform(-1.0, 1.0, (6, 3))
guess_x0 = true_x0 + 0.05 * rng.standard_normal((6, 3))


def observe():
    sim.reset(wp.array(true_x0, dtype=wp.vec3d))
    traj = sim.run(STEPS)
    return [wp.array(traj[f].numpy(), dtype=wp.vec3d) for f in FRAMES]


observations = observe()


def evaluate(x0):
    sim.reset(x0)
    traj = sim.run(STEPS)
    return float(fit_loss(traj, observations, FRAMES).numpy()[0])


def loss_and_grad(x0):
    sim.reset(x0)
    tape = wp.Tape()
    with tape:
        traj = sim.run(STEPS)
        loss = fit_loss(traj, observations, FRAMES)
    tape.backward(loss)
    g = x0.grad.numpy().copy()
    tape.zero()
    return float(loss.numpy()[0]), g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args()

    x0_np = guess_x0.copy()
    for it in range(args.iters):
        x0 = wp.array(x0_np, dtype=wp.vec3d, requires_grad=True)
        loss, g = loss_and_grad(x0)
        err = np.abs(x0_np - true_x0).max()
        print(f"it {it:2d}  snapshot misfit {loss:.6e}  max position error {err:.4f}")
        x0_np -= args.lr * g
    x0 = wp.array(x0_np, dtype=wp.vec3d, requires_grad=True)
    print(f"final misfit {evaluate(x0):.6e}")


if __name__ == "__main__":
    main()
