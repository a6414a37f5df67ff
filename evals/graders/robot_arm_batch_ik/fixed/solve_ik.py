"""Batch inverse kinematics for a 4-link planar arm: one joint configuration per target,
solved jointly by gradient descent on the mean reach error."""

import numpy as np
import warp as wp

from arm.kinematics import NUM_JOINTS, reach_error

NUM_POSES = 32


class BatchIK:
    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        self.link_lengths = wp.array([0.4, 0.3, 0.2, 0.1], dtype=float)
        radius = rng.uniform(0.3, 0.9, NUM_POSES)
        theta = rng.uniform(-1.2, 1.2, NUM_POSES)
        targets = np.stack([radius * np.cos(theta), radius * np.sin(theta)], axis=1).astype(np.float32)
        self.targets = wp.array(targets, dtype=wp.vec2)
        self.angles = wp.array(np.full((NUM_POSES, NUM_JOINTS), 0.3, dtype=np.float32), requires_grad=True)
        self.err = wp.zeros(NUM_POSES, dtype=float, requires_grad=True)

    def forward(self):
        wp.launch(reach_error, dim=NUM_POSES, inputs=[self.angles, self.link_lengths, self.targets], outputs=[self.err])
        return self.err

    def mean_error(self):
        return float(self.forward().numpy().mean())

    def gradient(self):
        tape = wp.Tape()
        with tape:
            self.forward()
        tape.backward(grads={self.err: wp.full(NUM_POSES, 1.0 / NUM_POSES, dtype=float)})
        grad = self.angles.grad.numpy().copy()
        tape.zero()
        return grad


def main():
    wp.init()
    ik = BatchIK()
    lr = 20.0
    for it in range(40):
        g = ik.gradient()
        ik.angles.assign(ik.angles.numpy() - lr * g)
        print(f"iter {it:2d}  mean reach error {ik.mean_error():.6f}")


if __name__ == "__main__":
    main()
