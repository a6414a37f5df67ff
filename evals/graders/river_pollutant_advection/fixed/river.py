"""Recover the flow-speed profile of a river reach from a dye-release experiment.

Dye is released upstream; after a while the concentration is sampled along the reach. We fit the
speed in every cell so the simulated dye cloud lands where it was measured.
"""

import numpy as np
import warp as wp

CELLS = 64
STEPS = 40
DT = 0.5
DIFFUSION = 0.05


@wp.kernel
def advect(conc: wp.array(dtype=float), speed: wp.array(dtype=float), dt: float, out: wp.array(dtype=float)):
    i = wp.tid()
    n = conc.shape[0]
    x = float(i) - speed[i] * dt
    x0 = wp.floor(x)
    w = x - x0
    i0 = int(x0)
    a = conc[((i0 % n) + n) % n]
    b = conc[(((i0 + 1) % n) + n) % n]
    out[i] = (1.0 - w) * a + w * b


@wp.kernel
def diffuse(conc: wp.array(dtype=float), k: float, out: wp.array(dtype=float)):
    i = wp.tid()
    n = conc.shape[0]
    left = conc[(i + n - 1) % n]
    right = conc[(i + 1) % n]
    out[i] = conc[i] + k * (left - 2.0 * conc[i] + right)


@wp.kernel
def sample_error(conc: wp.array(dtype=float), measured: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = conc[i] - measured[i]
    wp.atomic_add(loss, 0, d * d)


def dye_release():
    x = np.arange(CELLS, dtype=np.float32)
    return np.exp(-0.5 * ((x - 10.0) / 3.0) ** 2).astype(np.float32)


def true_speed():
    x = np.linspace(0.0, 1.0, CELLS)
    return (0.9 + 0.5 * np.sin(2.0 * np.pi * x)).astype(np.float32)


speed = wp.array(np.full(CELLS, 0.9, dtype=np.float32), requires_grad=True)
conc = [wp.zeros(CELLS, dtype=float, requires_grad=True) for _ in range(STEPS + 1)]
advected = [wp.zeros(CELLS, dtype=float, requires_grad=True) for _ in range(STEPS)]
measured = wp.zeros(CELLS, dtype=float)
loss = wp.zeros(1, dtype=float, requires_grad=True)


def simulate():
    conc[0].assign(dye_release())
    for t in range(STEPS):
        wp.launch(advect, dim=CELLS, inputs=[conc[t], speed, DT], outputs=[advected[t]])
        wp.launch(diffuse, dim=CELLS, inputs=[advected[t], DIFFUSION], outputs=[conc[t + 1]])
    return conc[STEPS]


def compute_loss():
    loss.zero_()
    final = simulate()
    wp.launch(sample_error, dim=CELLS, inputs=[final, measured], outputs=[loss])
    return loss


def record_measurements():
    guess = speed.numpy().copy()
    speed.assign(true_speed())
    measured.assign(simulate().numpy())
    speed.assign(guess)


record_measurements()

if __name__ == "__main__":
    lr = 0.05
    for epoch in range(30):
        tape = wp.Tape()
        with tape:
            compute_loss()
        tape.backward(loss)
        speed.assign(speed.numpy() - lr * speed.grad.numpy())
        tape.zero()
        print(f"epoch {epoch:2d}  sample misfit {loss.numpy()[0]:.5f}")
    print("speed error:", float(np.abs(speed.numpy() - true_speed()).mean()))
