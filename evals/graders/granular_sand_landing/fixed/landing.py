"""Throw pebbles onto a soft sand bed and tune their throw velocities so they come to rest
on the marked spots. Contact with the sand is a smooth penalty (softplus of penetration)."""

import numpy as np
import warp as wp

NUM_PEBBLES = 12
STEPS = 150
DT = 0.005
SHARPNESS = 400.0
BED_STIFFNESS = 60.0
BED_DRAG = 20.0


@wp.func
def softplus(z: float):
    return wp.where(z > 20.0, z, wp.log(1.0 + wp.exp(wp.min(z, 20.0))))


@wp.kernel
def step(
    x: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    dt: float,
    x_out: wp.array(dtype=wp.vec2),
    v_out: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    p = x[i]
    vel = v[i]
    depth = softplus(-SHARPNESS * p[1]) / SHARPNESS
    support = BED_STIFFNESS * depth
    drag = BED_DRAG * depth
    acc = wp.vec2(-drag * vel[0], support - 9.81 - drag * vel[1])
    vel = vel + acc * dt
    v_out[i] = vel
    x_out[i] = p + vel * dt


@wp.kernel
def spot_error(x: wp.array(dtype=wp.vec2), spots: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i][0] - spots[i]
    wp.atomic_add(loss, 0, d * d)


def setup():
    rng = np.random.default_rng(21)
    x0 = np.stack([np.zeros(NUM_PEBBLES), rng.uniform(0.5, 1.0, NUM_PEBBLES)], axis=1).astype(np.float32)
    v0 = np.stack([np.full(NUM_PEBBLES, 1.5), np.full(NUM_PEBBLES, 2.0)], axis=1).astype(np.float32)
    spots = rng.uniform(1.0, 2.0, NUM_PEBBLES).astype(np.float32)
    return x0, v0, spots


x0_np, v0_np, spots_np = setup()
throw = wp.array(v0_np, dtype=wp.vec2, requires_grad=True)
spots = wp.array(spots_np, dtype=float)
xs = [wp.zeros(NUM_PEBBLES, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS + 1)]
vs = [wp.zeros(NUM_PEBBLES, dtype=wp.vec2, requires_grad=True) for _ in range(STEPS)]
xs[0].assign(x0_np)
loss = wp.zeros(1, dtype=float, requires_grad=True)


def run():
    loss.zero_()
    vel = throw
    for t in range(STEPS):
        wp.launch(step, dim=NUM_PEBBLES, inputs=[xs[t], vel, DT], outputs=[xs[t + 1], vs[t]])
        vel = vs[t]
    wp.launch(spot_error, dim=NUM_PEBBLES, inputs=[xs[STEPS], spots], outputs=[loss])
    return loss


if __name__ == "__main__":
    for it in range(30):
        tape = wp.Tape()
        with tape:
            run()
        tape.backward(loss)
        throw.assign(throw.numpy() - 0.1 * throw.grad.numpy())
        tape.zero()
        print(f"iter {it:2d}  landing error {loss.numpy()[0]:.6f}")
    print("depth reached:", float(-min(x.numpy()[:, 1].min() for x in xs)))
