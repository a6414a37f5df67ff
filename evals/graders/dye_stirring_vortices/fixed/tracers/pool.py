import warp as wp


class StatePool:
    """Position buffers for a rollout: one per time step, because the tape replays every step."""

    def __init__(self, num_tracers: int, horizon: int, max_buffers: int):
        # A wrapped pool would overwrite positions the backward pass still reads once
        # horizon + 1 > max_buffers; use checkpointing if memory ever becomes the limit.
        self.buffers = [wp.zeros(num_tracers, dtype=wp.vec2, requires_grad=True) for _ in range(horizon + 1)]

    def __getitem__(self, t: int) -> wp.array:
        return self.buffers[t]
