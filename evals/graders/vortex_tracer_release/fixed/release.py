"""Choose release velocities for heavy tracer particles so they reach sampling probes
after drifting through a pair of smoothed point vortices."""

import numpy as np
import warp as wp

N = 24
STEPS = 60
DT = 0.02
TAU = 0.5


@wp.struct
class Particles:
    x: wp.array(dtype=wp.vec2)
    v: wp.array(dtype=wp.vec2)


@wp.func
def vortex_velocity(p: wp.vec2, center: wp.vec2, strength: float):
    r = p - center
    r2 = wp.dot(r, r) + 0.05
    return strength * wp.vec2(-r[1], r[0]) / r2


@wp.kernel
def release(x_start: wp.array(dtype=wp.vec2), v0: wp.array(dtype=wp.vec2), x: wp.array(dtype=wp.vec2), v: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    x[i] = x_start[i]
    v[i] = v0[i]


@wp.kernel
def drift(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    dt: float,
    tau: float,
    x_new: wp.array(dtype=wp.vec2),
    v_new: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    p = x[i]
    u = vortex_velocity(p, wp.vec2(-0.5, 0.0), 1.0) + vortex_velocity(p, wp.vec2(0.5, 0.0), -0.7)
    vel = v[i] + (u - v[i]) * (dt / tau)
    v_new[i] = vel
    x_new[i] = p + vel * dt


@wp.kernel
def probe_error(x: wp.array(dtype=wp.vec2), probes: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - probes[i]
    wp.atomic_add(loss, 0, wp.dot(d, d) / float(x.shape[0]))


def setup():
    angles = np.linspace(0.0, 2.0 * np.pi, N, endpoint=False)
    start = np.stack([1.2 * np.cos(angles), 1.2 * np.sin(angles)], axis=1).astype(np.float32)
    x_start = wp.array(start, dtype=wp.vec2)
    v0 = wp.array(np.zeros_like(start), dtype=wp.vec2, requires_grad=True)
    return x_start, v0


def make_particles():
    p = Particles()
    p.x = wp.zeros(N, dtype=wp.vec2, requires_grad=True)
    p.v = wp.zeros(N, dtype=wp.vec2, requires_grad=True)
    return p


x_start, v0 = setup()
targets = wp.zeros(N, dtype=wp.vec2)
states = [make_particles() for _ in range(STEPS + 1)]
loss = wp.zeros(1, dtype=float, requires_grad=True)


def simulate():
    wp.launch(release, dim=N, inputs=[x_start, v0], outputs=[states[0].x, states[0].v])
    for t in range(STEPS):
        cur, nxt = states[t], states[t + 1]
        wp.launch(drift, dim=N, inputs=[cur.x, cur.v, DT, TAU], outputs=[nxt.x, nxt.v])
    return states[STEPS].x


def objective():
    loss.zero_()
    final = simulate()
    wp.launch(probe_error, dim=N, inputs=[final, targets], outputs=[loss])
    return loss


def record_probe_positions(seed=11):
    rng = np.random.default_rng(seed)
    v0.assign(rng.normal(0.0, 1.0, (N, 2)).astype(np.float32))
    targets.assign(simulate().numpy())
    v0.zero_()


record_probe_positions()


if __name__ == "__main__":
    lr = 8.0
    for it in range(40):
        tape = wp.Tape()
        with tape:
            objective()
        tape.backward(loss)
        v0.assign(v0.numpy() - lr * v0.grad.numpy())
        tape.zero()
        print(f"it {it:02d}  mean squared probe error = {loss.numpy()[0]:.6f}")
