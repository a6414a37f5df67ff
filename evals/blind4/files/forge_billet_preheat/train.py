"""Tune the power of eight induction coils along a steel billet so that, after the ramp and the
soak, the temperature profile matches the forging schedule (in units of 100 K above ambient)."""

import numpy as np
import warp as wp
import warp.optim

CELLS = 40
COILS = 8
DT = 0.01
PREHEAT_STEPS = 80
SOAK_STEPS = 40


@wp.kernel
def heat_step(t: wp.array(dtype=float), power: wp.array(dtype=float), alpha: float, h: float, dt: float,
              t_out: wp.array(dtype=float)):
    i = wp.tid()
    left = t[wp.max(i - 1, 0)]
    right = t[wp.min(i + 1, CELLS - 1)]
    ti = t[i]
    q = power[i * COILS // CELLS]
    t_out[i] = ti + dt * (alpha * (left - 2.0 * ti + right) + q - h * ti * wp.abs(ti))


@wp.kernel
def schedule_error(t: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    e = t[i] - target[i]
    wp.atomic_add(loss, 0, e * e / float(CELLS))


def run(t, power, steps, alpha=30.0, h=0.8):
    for _ in range(steps):
        t_next = wp.empty(CELLS, dtype=float, requires_grad=True)
        wp.launch(heat_step, dim=CELLS, inputs=[t, power, alpha, h, DT], outputs=[t_next])
        t = t_next
    return t


def forging_target():
    x = np.linspace(0.0, 1.0, CELLS)
    return wp.array(3.0 + 2.0 * np.exp(-((x - 0.7) ** 2) / 0.02), dtype=float)


def train_step(power, target):
    t0 = wp.zeros(CELLS, dtype=float, requires_grad=True)
    # ramp to forging temperature first; only the soak is recorded
    t_ramp = run(t0, power, PREHEAT_STEPS)
    tape = wp.Tape()
    with tape:
        t_end = run(t_ramp, power, SOAK_STEPS)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(schedule_error, dim=CELLS, inputs=[t_end, target], outputs=[loss])
    tape.backward(loss)
    return float(loss.numpy()[0])


def main(iters=30):
    target = forging_target()
    power = wp.full(COILS, 5.0, dtype=float, requires_grad=True)
    opt = warp.optim.Adam([power], lr=0.5)
    for it in range(iters):
        power.grad.zero_()
        err = train_step(power, target)
        print(f"iter {it:2d}  schedule error {err:.5f}")
        opt.step([power.grad])
    print("coil power:", np.round(power.numpy(), 2))


if __name__ == "__main__":
    main()
