"""Calibrate the conductivity profile of a composite rod from thermocouple readings.

The rod starts hot in the middle and cools by conduction. We know the temperature at a handful of
thermocouples after a fixed time and fit one conductivity per rod segment by gradient descent.
"""

import numpy as np
import warp as wp

NUM_CELLS = 32
NUM_STEPS = 60
DT = 0.2
SENSORS = [2, 6, 9, 13, 16, 19, 23, 26, 29]


@wp.kernel
def face_flux(temp: wp.array(dtype=float), cond: wp.array(dtype=float), flux: wp.array(dtype=float)):
    i = wp.tid()
    k = 2.0 * cond[i] * cond[i + 1] / (cond[i] + cond[i + 1])
    flux[i] = -k * (temp[i + 1] - temp[i])


@wp.kernel
def advance(
    temp: wp.array(dtype=float),
    flux: wp.array(dtype=float),
    dt: float,
    temp_out: wp.array(dtype=float),
):
    i = wp.tid()
    n = temp.shape[0]
    inflow = float(0.0)
    outflow = float(0.0)
    if i > 0:
        inflow = flux[i - 1]
    if i < n - 1:
        outflow = flux[i]
    temp_out[i] = temp[i] + dt * (inflow - outflow)


@wp.kernel
def sensor_misfit(
    temp: wp.array(dtype=float),
    sensors: wp.array(dtype=int),
    measured: wp.array(dtype=float),
    loss: wp.array(dtype=float),
):
    s = wp.tid()
    d = temp[sensors[s]] - measured[s]
    wp.atomic_add(loss, 0, d * d)


def initial_temperature():
    x = np.linspace(-1.0, 1.0, NUM_CELLS)
    return (20.0 + 80.0 * np.exp(-8.0 * x * x)).astype(np.float32)


def true_conductivity():
    x = np.linspace(0.0, 1.0, NUM_CELLS)
    return (0.6 + 0.5 * np.sin(3.0 * x) * (x > 0.4)).astype(np.float32)


class RodModel:
    def __init__(self, cond_guess=0.5):
        self.sensors = wp.array(SENSORS, dtype=int)
        self.cond = wp.array(np.full(NUM_CELLS, cond_guess, dtype=np.float32), requires_grad=True)
        self.temps = [wp.zeros(NUM_CELLS, dtype=float, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.fluxes = [wp.zeros(NUM_CELLS - 1, dtype=float, requires_grad=True) for _ in range(NUM_STEPS)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.temps[0].assign(initial_temperature())
        self.measured = wp.array(self.synthetic_readings(), dtype=float)

    def synthetic_readings(self):
        cond = wp.array(true_conductivity(), dtype=float)
        temp = wp.array(initial_temperature(), dtype=float)
        nxt = wp.zeros_like(temp)
        flux = wp.zeros(NUM_CELLS - 1, dtype=float)
        for _ in range(NUM_STEPS):
            wp.launch(face_flux, dim=NUM_CELLS - 1, inputs=[temp, cond], outputs=[flux])
            wp.launch(advance, dim=NUM_CELLS, inputs=[temp, flux, DT], outputs=[nxt])
            temp, nxt = nxt, temp
        return temp.numpy()[SENSORS]

    def forward(self):
        self.loss.zero_()
        for t in range(NUM_STEPS):
            wp.launch(face_flux, dim=NUM_CELLS - 1, inputs=[self.temps[t], self.cond], outputs=[self.fluxes[t]])
            wp.launch(advance, dim=NUM_CELLS, inputs=[self.temps[t], self.fluxes[t], DT], outputs=[self.temps[t + 1]])
        wp.launch(
            sensor_misfit,
            dim=len(SENSORS),
            inputs=[self.temps[NUM_STEPS], self.sensors, self.measured],
            outputs=[self.loss],
        )
        return self.loss

    def objective(self):
        return float(self.forward().numpy()[0])

    def gradient(self):
        tape = wp.Tape()
        with tape:
            self.forward()
        tape.backward(self.loss)
        grad = self.cond.grad.numpy().copy()
        tape.zero()
        return grad


def main():
    wp.init()
    model = RodModel()
    lr = 2e-4
    for it in range(30):
        grad = model.gradient()
        cond = np.clip(model.cond.numpy() - lr * grad, 0.05, 2.0)
        model.cond.assign(cond)
        print(f"iter {it:3d}  misfit {model.objective():.6f}")
    err = np.abs(model.cond.numpy() - true_conductivity()).mean()
    print(f"mean conductivity error {err:.4f}")


if __name__ == "__main__":
    main()
