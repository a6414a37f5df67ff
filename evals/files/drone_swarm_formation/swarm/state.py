import numpy as np
import warp as wp


@wp.struct
class SwarmState:
    pos: wp.array(dtype=wp.vec3)
    vel: wp.array(dtype=wp.vec3)


def make_state(num_drones: int) -> SwarmState:
    s = SwarmState()
    s.pos = wp.zeros(num_drones, dtype=wp.vec3, requires_grad=True)
    s.vel = wp.zeros(num_drones, dtype=wp.vec3, requires_grad=True)
    return s


def grid_start(num_drones: int) -> np.ndarray:
    side = int(np.ceil(np.sqrt(num_drones)))
    ij = np.stack(np.unravel_index(np.arange(num_drones), (side, side)), axis=1).astype(np.float32)
    return np.concatenate([ij[:, :1], np.zeros((num_drones, 1), np.float32), ij[:, 1:]], axis=1)
