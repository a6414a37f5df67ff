"""Find the steady side wind on each bead of a hanging chain that swings it into a target pose."""

import argparse

import numpy as np
import warp as wp

from chain import ChainModel, CheckpointedRollout
from losses import pose_loss

wp.config.log_level = wp.LOG_WARNING

model = ChainModel()
rollout = CheckpointedRollout(model, num_segments=4, steps_per_segment=10)
q_init = model.rest_pose()
qd_init = np.zeros_like(q_init)

_rng = np.random.default_rng(7)
_swing = np.stack([0.6 * np.sin(np.linspace(0, 1.2, model.n)), np.zeros(model.n), 0.05 * _rng.standard_normal(model.n)], 1)
target = wp.array(q_init + _swing * np.linspace(0, 1, model.n)[:, None] ** 1.5 * model.rest * 2, dtype=wp.vec3d)


def objective(wind):
    """Pose error after the full swing (forward only)."""
    q, qd = rollout.forward(q_init, qd_init, wind)
    d = q - target.numpy()
    return float(np.sum(d * d))


def loss_and_grad(wind):
    rollout.forward(q_init, qd_init, wind)
    return rollout.backward(wind, lambda s: pose_loss(s, target))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.2)
    args = parser.parse_args()

    wind_np = np.zeros((model.n, 3))
    for it in range(args.iters):
        wind = wp.array(wind_np, dtype=wp.vec3d, requires_grad=True)
        loss, g = loss_and_grad(wind)
        print(f"iter {it}: pose error {loss:.6f}  |grad| {np.linalg.norm(g):.4f}")
        wind_np = wind_np - args.lr * g
    wind = wp.array(wind_np, dtype=wp.vec3d, requires_grad=True)
    print(f"final pose error {objective(wind):.6f}")


if __name__ == "__main__":
    main()
