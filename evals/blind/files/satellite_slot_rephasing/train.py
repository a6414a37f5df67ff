"""Rephase a ring of satellites into evenly spaced slots with small constant thrusts."""

import argparse

import numpy as np
import warp as wp

from constellation.checkpoint import SegmentedRollout
from constellation.dynamics import Constellation, ring
from losses import slot_loss

wp.config.log_level = wp.LOG_WARNING

N_SAT = 6
system = Constellation(N_SAT)
rollout = SegmentedRollout(system, segments=4, steps=12)

q0, qd0 = ring(N_SAT, 1.0, system.gm, phase_jitter=0.08, seed=11)
_T = rollout.segments * rollout.steps * system.dt
_slot_q, _ = ring(N_SAT, 1.0, system.gm)
_rot = np.array([[np.cos(_T), -np.sin(_T)], [np.sin(_T), np.cos(_T)]], dtype=np.float32)
slots = wp.array(_slot_q @ _rot.T, dtype=wp.vec2)


def evaluate(thrust):
    final = rollout.forward(q0, qd0, thrust)
    return float(slot_loss(final, slots).numpy()[0])


def gradient(thrust):
    rollout.forward(q0, qd0, thrust)
    return rollout.backward(thrust, lambda s: slot_loss(s, slots))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--lr", type=float, default=2e-4)
    args = ap.parse_args()

    u = np.zeros((N_SAT, 2), dtype=np.float32)
    for it in range(args.iters):
        thrust = wp.array(u, dtype=wp.vec2, requires_grad=True)
        loss, g = gradient(thrust)
        print(f"[{it:02d}] slot error {loss:.5f}  max thrust {np.abs(u).max():.4f}")
        u -= args.lr * g
    print(f"final slot error {evaluate(wp.array(u, dtype=wp.vec2, requires_grad=True)):.5f}")


if __name__ == "__main__":
    main()
