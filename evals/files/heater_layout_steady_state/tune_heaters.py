"""Fit the six heater powers of a conductive rod to the steady-state readings of eight thermocouples."""

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

NUM_CELLS = 48
CONDUCTANCE = 1.0
CONVECTION = 0.2
HEATER_CELLS = [5, 12, 19, 27, 34, 42]
HEATER_WIDTH = 2.0
SENSOR_CELLS = [3, 9, 15, 21, 26, 32, 38, 45]
SOLVE_ITERS = 200
TRAIN_ITERS = 12


@wp.kernel
def heat_source(power: wp.array(dtype=float), centers: wp.array(dtype=float), width: float, q: wp.array(dtype=float)):
    i = wp.tid()
    s = float(0.0)
    for h in range(6):
        d = (float(i) - centers[h]) / width
        s += power[h] * wp.exp(-0.5 * d * d)
    q[i] = s


@wp.kernel
def jacobi_sweep(
    t_old: wp.array(dtype=float), q: wp.array(dtype=float), k: float, h: float, t_new: wp.array(dtype=float)
):
    i = wp.tid()
    n = t_old.shape[0]
    left = float(0.0)
    right = float(0.0)
    if i > 0:
        left = t_old[i - 1]
    if i < n - 1:
        right = t_old[i + 1]
    t_new[i] = (q[i] + k * (left + right)) / (2.0 * k + h)


@wp.kernel
def sensor_loss(
    t: wp.array(dtype=float), cells: wp.array(dtype=int), reading: wp.array(dtype=float), loss: wp.array(dtype=float)
):
    j = wp.tid()
    d = t[cells[j]] - reading[j]
    wp.atomic_add(loss, 0, d * d / float(cells.shape[0]))


CENTERS = wp.array(np.array(HEATER_CELLS, dtype=np.float32), dtype=float)
SENSORS = wp.array(np.array(SENSOR_CELLS, dtype=np.int32), dtype=int)


class Rod:
    """Steady-state solve of -k*lap(T) + h*T = q with Jacobi sweeps."""

    def __init__(self, iters: int):
        self.iters = iters
        self.q = wp.zeros(NUM_CELLS, dtype=float, requires_grad=True)
        self.temps = [wp.zeros(NUM_CELLS, dtype=float, requires_grad=True) for _ in range(iters + 1)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def solve(self, power: wp.array) -> wp.array:
        wp.launch(heat_source, dim=NUM_CELLS, inputs=[power, CENTERS, HEATER_WIDTH], outputs=[self.q])
        self.temps[0].zero_()
        for it in range(self.iters):
            wp.launch(
                jacobi_sweep,
                dim=NUM_CELLS,
                inputs=[self.temps[it], self.q, CONDUCTANCE, CONVECTION],
                outputs=[self.temps[it + 1]],
            )
        return self.temps[-1]

    def misfit(self, power: wp.array, reading: wp.array) -> wp.array:
        temps = self.solve(power)
        self.loss.zero_()
        wp.launch(sensor_loss, dim=len(SENSOR_CELLS), inputs=[temps, SENSORS, reading], outputs=[self.loss])
        return self.loss


def make_problem():
    true_power = wp.array(np.array([1.2, 0.4, 0.9, 1.5, 0.3, 0.8], dtype=np.float32), dtype=float)
    temps = Rod(SOLVE_ITERS).solve(true_power).numpy()
    reading = wp.array(temps[SENSOR_CELLS], dtype=float)
    power = wp.array(np.full(6, 0.5, dtype=np.float32), dtype=float, requires_grad=True)
    return power, reading


POWER, READING = make_problem()
EVAL_ROD = Rod(SOLVE_ITERS)
TRAIN_ROD = Rod(TRAIN_ITERS)


def evaluate(power: wp.array = POWER) -> float:
    return float(EVAL_ROD.misfit(power, READING).numpy()[0])


def gradient(power: wp.array = POWER) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        loss = TRAIN_ROD.misfit(power, READING)
    tape.backward(loss)
    return tape


@wp.kernel
def descend(p: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = wp.max(p[i] - lr * g[i], 0.0)


if __name__ == "__main__":
    lr = 0.3
    for it in range(61):
        tape = gradient(POWER)
        wp.launch(descend, dim=6, inputs=[POWER, POWER.grad, lr])
        tape.zero()
        if it % 10 == 0:
            print(f"iter {it:4d}  sensor mse {evaluate():.4e}")
    print("fitted powers:", np.round(POWER.numpy(), 3))
