import warp as wp


class RigBuffers:
    """Every per-step quantity gets its own buffer so the tape can replay the whole drive."""

    def __init__(self, num_rigs: int, num_steps: int):
        self.z = [wp.zeros(num_rigs, dtype=float, requires_grad=True) for _ in range(num_steps + 1)]
        self.v = [wp.zeros(num_rigs, dtype=float, requires_grad=True) for _ in range(num_steps + 1)]
        self.spring = [wp.zeros(num_rigs, dtype=float, requires_grad=True) for _ in range(num_steps)]
        self.damper = [wp.zeros(num_rigs, dtype=float, requires_grad=True) for _ in range(num_steps)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
