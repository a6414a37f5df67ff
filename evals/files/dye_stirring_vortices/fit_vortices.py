"""Fit the strengths of four stirring vortices so that dye tracers end up where the camera saw them."""

import sys

import numpy as np
import warp as wp

from tracers import config
from tracers.flow import VortexFlow

wp.config.log_level = wp.LOG_WARNING

HORIZON = int(sys.argv[1]) if len(sys.argv) > 1 and __name__ == "__main__" else config.HORIZON

_rng = np.random.default_rng(4)
X0 = wp.array(_rng.uniform(-1.0, 1.0, (config.NUM_TRACERS, 2)).astype(np.float32), dtype=wp.vec2, requires_grad=True)
CENTERS = wp.array(np.array([[-0.5, -0.5], [0.5, -0.5], [0.5, 0.5], [-0.5, 0.5]], np.float32), dtype=wp.vec2)
TRUE_STRENGTHS = np.array([0.20, -0.12, 0.16, -0.08], np.float32)

FLOW = VortexFlow(config.NUM_TRACERS, HORIZON, config.MAX_BUFFERS, config.DT)
_seen = FLOW.rollout(X0, CENTERS, wp.array(TRUE_STRENGTHS, dtype=float)).numpy()
# camera detections are noisy (about 5 mm)
TARGET = wp.array((_seen + _rng.normal(0.0, 0.005, _seen.shape)).astype(np.float32), dtype=wp.vec2)
STRENGTHS = wp.array(np.array([0.1, -0.05, 0.1, -0.05], np.float32), dtype=float, requires_grad=True)


def camera_loss(strengths=STRENGTHS) -> float:
    return float(FLOW.objective(X0, CENTERS, strengths, TARGET).numpy()[0])


def camera_grad(strengths=STRENGTHS) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        loss = FLOW.objective(X0, CENTERS, strengths, TARGET)
    tape.backward(loss)
    return tape


if __name__ == "__main__":
    lr = 0.01
    for it in range(50):
        tape = camera_grad()
        loss = float(FLOW.loss.numpy()[0])
        STRENGTHS.assign(STRENGTHS.numpy() - lr * STRENGTHS.grad.numpy())
        tape.zero()
        if it % 5 == 0:
            print(f"iter {it:3d}  camera loss {loss:.4e}")
    print(f"horizon {HORIZON}: strengths {np.round(STRENGTHS.numpy(), 4)} (true {TRUE_STRENGTHS})")
