"""Plan the power of the four heating-mat zones so the slab is at 18 C at dawn and 22 C at dusk."""

import numpy as np
import warp as wp

from slab import ZONES, day_and_night, evening_temperature


def objective_and_grad(heater_np, t_evening):
    heater = wp.array(heater_np, dtype=float, requires_grad=True)
    t0 = wp.array(t_evening, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        loss = day_and_night(heater, t0)
    tape.backward(loss)
    return float(loss.numpy()[0]), heater.grad.numpy().copy()


def main(iters=20, lr=0.5):
    t_evening = evening_temperature()
    heater = np.full((ZONES, ZONES), 4.0, dtype=np.float32)
    for it in range(iters):
        value, g = objective_and_grad(heater, t_evening)
        print(f"iter {it:2d}  comfort error {value:.5f}")
        heater = np.clip(heater - lr * g, 0.0, None).astype(np.float32)
    print("zone power:\n", np.round(heater, 2))


if __name__ == "__main__":
    main()
