"""Fit per-spring stiffness so the hanging cloth matches a scanned drape."""

import numpy as np
import warp as wp

from clothsim import ClothSim


def make_target(sim, seed=7):
    rng = np.random.default_rng(seed)
    true_k = 150.0 * (1.0 + 0.6 * rng.random(sim.num_springs)).astype(np.float32)
    saved = sim.stiffness.numpy().copy()
    sim.stiffness.assign(true_k)
    scan = sim.simulate().numpy()
    sim.stiffness.assign(saved)
    sim.target.assign(scan)
    return true_k


def compute_gradient(sim):
    tape = wp.Tape()
    with tape:
        sim.forward()
    tape.backward(sim.loss)
    grad = sim.stiffness.grad.numpy().copy()
    tape.zero()
    return grad


def main():
    wp.init()
    sim = ClothSim()
    make_target(sim)
    lr = 2.0e5
    for it in range(25):
        grad = compute_gradient(sim)
        k = np.maximum(sim.stiffness.numpy() - lr * grad, 10.0)
        sim.stiffness.assign(k)
        loss = sim.forward().numpy()[0]
        print(f"iter {it:2d}  drape error {loss:.6e}")


if __name__ == "__main__":
    main()
