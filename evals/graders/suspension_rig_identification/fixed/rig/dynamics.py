import warp as wp

from .buffers import RigBuffers


@wp.func
def bump(t: float):
    # a 10 cm cosine bump between t = 0.1 s and t = 0.3 s
    if t < 0.1 or t > 0.3:
        return 0.0
    return 0.05 * (1.0 - wp.cos(2.0 * 3.14159265 * (t - 0.1) / 0.2))


@wp.func
def bump_rate(t: float):
    if t < 0.1 or t > 0.3:
        return 0.0
    return 0.05 * (2.0 * 3.14159265 / 0.2) * wp.sin(2.0 * 3.14159265 * (t - 0.1) / 0.2)


@wp.kernel
def spring_force(z: wp.array(dtype=float), stiffness: wp.array(dtype=float), t: float, f: wp.array(dtype=float)):
    i = wp.tid()
    f[i] = -stiffness[i] * (z[i] - bump(t))


@wp.kernel
def damper_force(v: wp.array(dtype=float), damping: wp.array(dtype=float), t: float, f: wp.array(dtype=float)):
    i = wp.tid()
    f[i] = -damping[i] * (v[i] - bump_rate(t))


@wp.kernel
def integrate(
    z: wp.array(dtype=float),
    v: wp.array(dtype=float),
    f_spring: wp.array(dtype=float),
    f_damper: wp.array(dtype=float),
    inv_mass: float,
    dt: float,
    z_new: wp.array(dtype=float),
    v_new: wp.array(dtype=float),
):
    i = wp.tid()
    vel = v[i] + dt * inv_mass * (f_spring[i] + f_damper[i])
    v_new[i] = vel
    z_new[i] = z[i] + dt * vel


@wp.kernel
def track_error(
    z: wp.array(dtype=float), z_meas: wp.array(dtype=float), weight: float, loss: wp.array(dtype=float)
):
    i = wp.tid()
    d = z[i] - z_meas[i]
    wp.atomic_add(loss, 0, weight * d * d)


class QuarterCarBatch:
    def __init__(self, num_rigs: int, num_steps: int, dt: float = 0.005, mass: float = 1.0):
        self.n = num_rigs
        self.steps = num_steps
        self.dt = dt
        self.inv_mass = 1.0 / mass
        self.buf = RigBuffers(num_rigs, num_steps)

    def drive(self, stiffness: wp.array, damping: wp.array):
        b = self.buf
        b.z[0].zero_()
        b.v[0].zero_()
        for s in range(self.steps):
            t = s * self.dt
            wp.launch(spring_force, dim=self.n, inputs=[b.z[s], stiffness, t], outputs=[b.spring[s]])
            wp.launch(damper_force, dim=self.n, inputs=[b.v[s], damping, t], outputs=[b.damper[s]])
            wp.launch(
                integrate,
                dim=self.n,
                inputs=[b.z[s], b.v[s], b.spring[s], b.damper[s], self.inv_mass, self.dt],
                outputs=[b.z[s + 1], b.v[s + 1]],
            )
        return b.z

    def tracking_loss(self, stiffness, damping, measured: list, every: int):
        z = self.drive(stiffness, damping)
        self.buf.loss.zero_()
        frames = range(every, self.steps + 1, every)
        for k, s in enumerate(frames):
            wp.launch(
                track_error, dim=self.n, inputs=[z[s], measured[k], 1.0 / (self.n * len(frames))], outputs=[self.buf.loss]
            )
        return self.buf.loss
