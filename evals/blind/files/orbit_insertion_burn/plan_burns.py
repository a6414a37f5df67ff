"""Plan one impulsive burn per spacecraft that puts each of them on the same circular orbit."""

import argparse

import numpy as np
import warp as wp

from mission.orbits import coast, elliptic_states
from objective import circularization_terms

wp.config.log_level = wp.LOG_WARNING

MU = 1.0
DT = 0.02
STEPS = 60
TARGET_RADIUS = 1.3
FUEL_WEIGHT = 0.05
NUM_CRAFT = 4

r0_np, v0_np = elliptic_states(NUM_CRAFT, a=1.15, e=0.12, seed=3)
r0 = wp.array(r0_np, dtype=wp.vec2)
v0 = wp.array(v0_np, dtype=wp.vec2)
# first guess: a small prograde kick for every craft
dv_init = (0.08 * v0_np / np.linalg.norm(v0_np, axis=1, keepdims=True)).astype(np.float32)


def evaluate_terms(dv):
    terms = wp.zeros(2, dtype=float, requires_grad=True)
    r, v = coast(r0, v0, dv, MU, DT, STEPS)
    wp.launch(circularization_terms, dim=NUM_CRAFT, inputs=[r, v, dv, TARGET_RADIUS, MU], outputs=[terms])
    return terms


def cost(dv):
    t = evaluate_terms(dv).numpy()
    return float(t[0] + FUEL_WEIGHT * t[1])


def cost_gradient(dv):
    tape = wp.Tape()
    with tape:
        terms = evaluate_terms(dv)
    tape.backward(grads={terms: wp.array([1.0, FUEL_WEIGHT], dtype=float)})
    t = terms.numpy()
    g = dv.grad.numpy().copy()
    tape.zero()
    return float(t[0] + FUEL_WEIGHT * t[1]), float(t[0]), float(t[1]), g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--lr", type=float, default=0.1)
    args = ap.parse_args()

    dv_np = dv_init.copy()
    for it in range(args.iters):
        dv = wp.array(dv_np, dtype=wp.vec2, requires_grad=True)
        total, miss, fuel, g = cost_gradient(dv)
        print(f"iter {it:2d}  cost {total:.6f}  (orbit miss {miss:.6f}, delta-v^2 {fuel:.5f})")
        dv_np = dv_np - args.lr * g
    print(f"final cost {cost(wp.array(dv_np, dtype=wp.vec2)):.6f}")


if __name__ == "__main__":
    main()
