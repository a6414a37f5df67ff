import warp as wp


@wp.kernel
def actuated_springs(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    springs: wp.array(dtype=int, ndim=2),
    rest: wp.array(dtype=float),
    activation: wp.array(dtype=float),
    phase: float,
    stiffness: float,
    damping: float,
    f: wp.array(dtype=wp.vec3),
):
    s = wp.tid()
    i = springs[s, 0]
    j = springs[s, 1]
    d = x[j] - x[i]
    length = wp.length(d)
    dir = d / length
    target = rest[s] * (1.0 + activation[s] * wp.sin(phase))
    force = (stiffness * (length - target) + damping * wp.dot(v[j] - v[i], dir)) * dir
    wp.atomic_add(f, i, force)
    wp.atomic_sub(f, j, force)


@wp.kernel
def symplectic_euler(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    f: wp.array(dtype=wp.vec3),
    inv_mass: float,
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    vel = v[i] + f[i] * (inv_mass * dt)
    v_out[i] = vel
    x_out[i] = x[i] + vel * dt


class SpringSolver:
    def __init__(self, model, dt=0.002, damping=1.0, frequency=12.0):
        self.model = model
        self.dt = dt
        self.damping = damping
        self.frequency = frequency

    def step(self, state_in, state_out, activation, t):
        m = self.model
        state_in.f.zero_()
        wp.launch(
            actuated_springs,
            dim=m.num_springs,
            inputs=[state_in.x, state_in.v, m.springs, m.rest, activation, self.frequency * t * self.dt,
                    m.stiffness, self.damping],
            outputs=[state_in.f],
        )
        wp.launch(
            symplectic_euler,
            dim=m.num_particles,
            inputs=[state_in.x, state_in.v, state_in.f, m.inv_mass, self.dt],
            outputs=[state_out.x, state_out.v],
        )
