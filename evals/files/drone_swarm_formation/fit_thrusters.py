"""Find constant per-drone thrust vectors that fly a grid of drones into a target formation in 2 s."""

import numpy as np
import warp as wp

from swarm.dynamics import SwarmModel
from swarm.objective import formation_loss
from swarm.state import grid_start, make_state

wp.config.log_level = wp.LOG_WARNING

NUM_DRONES = 25
NUM_STEPS = 40

MODEL = SwarmModel(NUM_DRONES)
P0 = wp.array(grid_start(NUM_DRONES), dtype=wp.vec3)
V0 = wp.zeros(NUM_DRONES, dtype=wp.vec3)
_rng = np.random.default_rng(3)
_offset = np.stack([_rng.uniform(-1.5, 1.5, NUM_DRONES), _rng.uniform(3.0, 5.0, NUM_DRONES), _rng.uniform(-1.5, 1.5, NUM_DRONES)], axis=1)
TARGET = wp.array((grid_start(NUM_DRONES) * 1.5 + _offset).astype(np.float32), dtype=wp.vec3)
THRUST = wp.array(np.tile(np.array([0.0, 5.0, 0.0], np.float32), (NUM_DRONES, 1)), dtype=wp.vec3, requires_grad=True)

STATE = make_state(NUM_DRONES)
TARGET_VEL = wp.vec3(2.0, 0.0, 0.0)
LOSS = wp.zeros(1, dtype=float, requires_grad=True)


def rollout_loss(thrust=THRUST) -> float:
    final = MODEL.simulate(STATE, P0, V0, thrust, NUM_STEPS)
    return float(formation_loss(final, TARGET, TARGET_VEL, LOSS).numpy()[0])


def rollout_grad(thrust=THRUST) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        final = MODEL.simulate(STATE, P0, V0, thrust, NUM_STEPS)
        formation_loss(final, TARGET, TARGET_VEL, LOSS)
    tape.backward(LOSS)
    return tape


@wp.kernel
def sgd_step(p: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


if __name__ == "__main__":
    for it in range(100):
        tape = rollout_grad(THRUST)
        loss = float(LOSS.numpy()[0])
        wp.launch(sgd_step, dim=NUM_DRONES, inputs=[THRUST, THRUST.grad, 1.5])
        tape.zero()
        if it % 10 == 0:
            print(f"iter {it:3d}  loss {loss:.6f}")
    print(f"final loss {rollout_loss():.6f}")
