"""Heat in a 12 x 12 greenhouse floor slab with four heating-mat zones: a cold night, then a sunny day."""

import numpy as np
import warp as wp

N = 12
ZONES = 2
NIGHT_STEPS = 40
DAY_STEPS = 40
DT = 0.05


@wp.kernel
def conduct(t: wp.array2d(dtype=float), kappa: float, flux: wp.array2d(dtype=float)):
    i, j = wp.tid()
    if i + 1 < N:
        q = kappa * (t[i + 1, j] - t[i, j])
        flux[i, j] += q
        flux[i + 1, j] -= q
    if j + 1 < N:
        q = kappa * (t[i, j + 1] - t[i, j])
        flux[i, j] += q
        flux[i, j + 1] -= q


@wp.kernel
def update(t: wp.array2d(dtype=float), flux: wp.array2d(dtype=float), heater: wp.array2d(dtype=float),
           ambient: float, sun: float, dt: float, t_out: wp.array2d(dtype=float)):
    i, j = wp.tid()
    d = t[i, j] - ambient
    h = heater[i * ZONES // N, j * ZONES // N]
    t_out[i, j] = t[i, j] + dt * (flux[i, j] + h + sun - 0.4 * d - 0.05 * d * wp.abs(d))


@wp.kernel
def comfort_error(t: wp.array2d(dtype=float), goal: float, loss: wp.array(dtype=float)):
    i, j = wp.tid()
    e = t[i, j] - goal
    wp.atomic_add(loss, 0, e * e / float(N * N))


def phase(t, heater, ambient, sun, steps):
    for _ in range(steps):
        flux = wp.zeros((N, N), dtype=float, requires_grad=True)
        wp.launch(conduct, dim=(N, N), inputs=[t, 2.0], outputs=[flux])
        t_next = wp.empty((N, N), dtype=float, requires_grad=True)
        wp.launch(update, dim=(N, N), inputs=[t, flux, heater, ambient, sun, DT], outputs=[t_next])
        t = t_next
    return t


def day_and_night(heater, t_start):
    """Comfort error at dawn plus at the end of the day (recorded on the active tape)."""
    night_end = phase(t_start, heater, 2.0, 0.0, NIGHT_STEPS)
    day = wp.zeros((N, N), dtype=float, requires_grad=True)
    wp.copy(day, night_end)
    day_end = phase(day, heater, 14.0, 3.0, DAY_STEPS)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(comfort_error, dim=(N, N), inputs=[night_end, 18.0], outputs=[loss])
    wp.launch(comfort_error, dim=(N, N), inputs=[day_end, 22.0], outputs=[loss])
    return loss


def evening_temperature():
    x = np.linspace(0.0, 1.0, N)
    return (15.0 + 2.0 * np.add.outer(x, x)).astype(np.float32)
