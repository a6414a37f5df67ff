import warp as wp

from .state import SwarmState

GRAVITY = wp.constant(wp.vec3(0.0, -9.81, 0.0))


@wp.kernel
def init_state(p0: wp.array(dtype=wp.vec3), v0: wp.array(dtype=wp.vec3), s: SwarmState):
    i = wp.tid()
    s.pos[i] = p0[i]
    s.vel[i] = v0[i]


@wp.kernel
def step(s: SwarmState, thrust: wp.array(dtype=wp.vec3), mass: float, drag: float, dt: float):
    i = wp.tid()
    v = s.vel[i]
    f = thrust[i] + mass * GRAVITY - drag * wp.length(v) * v
    v = v + dt * f / mass
    s.vel[i] = v
    s.pos[i] = s.pos[i] + dt * v


class SwarmModel:
    def __init__(self, num_drones: int, mass: float = 0.5, drag: float = 0.6, dt: float = 0.05):
        self.n = num_drones
        self.mass = mass
        self.drag = drag
        self.dt = dt

    def simulate(self, state: SwarmState, p0, v0, thrust, num_steps: int) -> SwarmState:
        wp.launch(init_state, dim=self.n, inputs=[p0, v0], outputs=[state])
        for _ in range(num_steps):
            wp.launch(step, dim=self.n, inputs=[state, thrust, self.mass, self.drag, self.dt])
        return state
