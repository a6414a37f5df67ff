"""Identify spring stiffness and damping of 12 suspension rigs from their logged body travel over a bump."""

import numpy as np
import warp as wp

from rig.dynamics import QuarterCarBatch

wp.config.log_level = wp.LOG_WARNING

NUM_RIGS = 12
NUM_STEPS = 80
LOG_EVERY = 10

SIM = QuarterCarBatch(NUM_RIGS, NUM_STEPS)

_rng = np.random.default_rng(2)
_k_true = _rng.uniform(300.0, 600.0, NUM_RIGS).astype(np.float32)
_c_true = _rng.uniform(8.0, 30.0, NUM_RIGS).astype(np.float32)
_z = SIM.drive(wp.array(_k_true, dtype=float), wp.array(_c_true, dtype=float))
MEASURED = [wp.clone(_z[s], requires_grad=False) for s in range(LOG_EVERY, NUM_STEPS + 1, LOG_EVERY)]

STIFFNESS = wp.array(np.full(NUM_RIGS, 450.0, np.float32), dtype=float, requires_grad=True)
DAMPING = wp.array(np.full(NUM_RIGS, 15.0, np.float32), dtype=float, requires_grad=True)


def tracking_loss(stiffness=STIFFNESS, damping=DAMPING) -> float:
    return float(SIM.tracking_loss(stiffness, damping, MEASURED, LOG_EVERY).numpy()[0])


def tracking_grad(stiffness=STIFFNESS, damping=DAMPING) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        loss = SIM.tracking_loss(stiffness, damping, MEASURED, LOG_EVERY)
    tape.backward(loss)
    return tape


if __name__ == "__main__":
    lr_k, lr_c = 4.0e7, 2.0e5
    for it in range(48):
        tape = tracking_grad()
        loss = float(SIM.buf.loss.numpy()[0])
        STIFFNESS.assign(STIFFNESS.numpy() - lr_k * STIFFNESS.grad.numpy())
        DAMPING.assign(np.clip(DAMPING.numpy() - lr_c * DAMPING.grad.numpy(), 0.0, None))
        tape.zero()
        if it % 6 == 0:
            print(f"iter {it:3d}  tracking mse {loss:.4e}")
    print("damping  :", np.round(DAMPING.numpy(), 1))
    print("stiffness:", np.round(STIFFNESS.numpy(), 0))
