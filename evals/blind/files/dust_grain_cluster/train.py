"""Choose nozzle exit velocities so eight dust grains land near their sample cups without bunching up."""

import argparse

import numpy as np
import warp as wp

from losses import cluster_loss
from sim.flight import GrainLauncher

wp.config.mode = "release"


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=6)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=4)
    return p.parse_args(argv)


def cups(n):
    ang = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False)
    return np.stack([0.6 * np.cos(ang), 0.6 * np.sin(ang), np.full(n, -0.2)], axis=1).astype(np.float32)


def initial_velocity(n, seed):
    rng = np.random.default_rng(seed)
    v = rng.normal(0.0, 0.3, (n, 3))
    v[:, 2] += 1.5
    return v.astype(np.float32)


def loss_and_grad(launcher, v0_np, target):
    v0 = wp.array(v0_np, dtype=wp.vec3, requires_grad=True)
    tape = wp.Tape()
    with tape:
        x = launcher.launch(v0)
        loss = cluster_loss(x, target)
    tape.backward(loss)
    return float(loss.numpy()[0]), v0.grad.numpy()


def main():
    args = parse_args()
    launcher = GrainLauncher()
    target = wp.array(cups(launcher.n), dtype=wp.vec3)
    v0_np = initial_velocity(launcher.n, args.seed)
    for it in range(args.iters):
        l, g = loss_and_grad(launcher, v0_np, target)
        print(f"iteration {it}: cluster loss {l:.5f}")
        v0_np = v0_np - args.lr * g
    print("exit velocities:\n", np.round(v0_np, 3))


if __name__ == "__main__":
    main()
