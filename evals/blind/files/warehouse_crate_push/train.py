"""Learn the shove each crate needs so it slides (with Coulomb friction) to its parking spot."""

import argparse

import numpy as np
import warp as wp

from losses import placement_loss
from physics import Floor

wp.config.log_level = wp.LOG_WARNING

N = 5
floor = Floor(N)
rng = np.random.default_rng(1)
start = np.stack([np.arange(N) * 1.0, np.zeros(N)], 1).astype(np.float32)
goal_np = start + np.stack([rng.uniform(0.4, 1.2, N), rng.uniform(-0.5, 0.5, N)], 1).astype(np.float32)
goal = wp.array(goal_np, dtype=wp.vec2)
init_push = np.tile(np.array([8.0, 0.0], np.float32), (N, 1))


def objective(push):
    return placement_loss(floor.slide(start, push), goal)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--lr", type=float, default=10.0)
    args = ap.parse_args()

    push_np = init_push.copy()
    for it in range(args.iters):
        push = wp.array(push_np, dtype=wp.vec2, requires_grad=True)
        tape = wp.Tape()
        with tape:
            loss = objective(push)
        tape.backward(loss)
        print(f"iter {it}  placement error {loss.numpy()[0]:.5f}")
        push_np = push_np - args.lr * push.grad.numpy()
    push = wp.array(push_np, dtype=wp.vec2)
    print(f"final placement error {objective(push).numpy()[0]:.5f}")


if __name__ == "__main__":
    main()
