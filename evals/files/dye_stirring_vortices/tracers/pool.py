import warp as wp


class StatePool:
    """Position buffers for a rollout, at most `max_buffers` of them alive at once."""

    def __init__(self, num_tracers: int, horizon: int, max_buffers: int):
        count = min(horizon + 1, max_buffers)
        self.buffers = [wp.zeros(num_tracers, dtype=wp.vec2, requires_grad=True) for _ in range(count)]

    def __getitem__(self, t: int) -> wp.array:
        return self.buffers[t % len(self.buffers)]
