import warp as wp

from .state import SwarmState, make_state

GRAVITY = wp.constant(wp.vec3(0.0, -9.81, 0.0))


@wp.kernel
def init_state(p0: wp.array(dtype=wp.vec3), v0: wp.array(dtype=wp.vec3), s: SwarmState):
    i = wp.tid()
    s.pos[i] = p0[i]
    s.vel[i] = v0[i]


@wp.kernel
def step(s: SwarmState, thrust: wp.array(dtype=wp.vec3), mass: float, drag: float, dt: float, s_next: SwarmState):
    i = wp.tid()
    v = s.vel[i]
    f = thrust[i] + mass * GRAVITY - drag * wp.length(v) * v
    v = v + dt * f / mass
    s_next.vel[i] = v
    s_next.pos[i] = s.pos[i] + dt * v


class SwarmModel:
    def __init__(self, num_drones: int, mass: float = 0.5, drag: float = 0.6, dt: float = 0.05):
        self.n = num_drones
        self.mass = mass
        self.drag = drag
        self.dt = dt
        self._states: list[SwarmState] = []

    def simulate(self, state: SwarmState, p0, v0, thrust, num_steps: int) -> SwarmState:
        # One state per step: the backward pass needs every intermediate velocity.
        if len(self._states) != num_steps:
            self._states = [make_state(self.n) for _ in range(num_steps)]
        wp.launch(init_state, dim=self.n, inputs=[p0, v0], outputs=[state])
        current = state
        for k in range(num_steps):
            nxt = self._states[k]
            wp.launch(step, dim=self.n, inputs=[current, thrust, self.mass, self.drag, self.dt], outputs=[nxt])
            current = nxt
        return current
