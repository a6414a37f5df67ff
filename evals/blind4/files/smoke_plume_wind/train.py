"""Fit the cross-wind profile (one speed per grid row) that bends the smoke plume onto the observed one."""

import numpy as np
import warp as wp

from plume import NY, Plume


def loss_and_grad(plume, wind_np):
    wind = wp.array(wind_np, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        loss = plume.loss(wind)
    tape.backward(loss)
    return float(loss.numpy()[0]), wind.grad.numpy()


def main(iters=20, lr=0.2):
    plume = Plume()
    wind = np.ones(NY, dtype=np.float32)
    for it in range(iters):
        value, g = loss_and_grad(plume, wind)
        print(f"iter {it:2d}  plume misfit {value:.6f}")
        wind = (wind - lr * g).astype(np.float32)
    print("wind profile:", np.round(wind, 2))


if __name__ == "__main__":
    main()
