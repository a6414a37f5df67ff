"""Choose the mooring line lengths so three buoys ride at their survey stations in the current."""

import argparse

import numpy as np
import warp as wp

from mooring.field import MooringField

wp.config.log_level = wp.LOG_WARNING

centers = [(0.0, 0.0), (30.0, 0.0), (60.0, 5.0)]
field = MooringField(centers)
station = wp.array(np.array([[0.3, 0.6, -0.4], [29.5, 0.2, -0.2], [60.4, 4.6, -0.6]], dtype=np.float32), dtype=wp.vec3)
rest_init = np.full(4 * len(centers), 13.8, dtype=np.float32)


def station_loss(rest):
    return field.loss(rest, station)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.5)
    args = ap.parse_args()

    rest_np = rest_init.copy()
    for it in range(args.iters):
        rest = wp.array(rest_np, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            loss = station_loss(rest)
        tape.backward(loss)
        print(f"iter {it:2d}  station error {loss.numpy()[0]:.5f} m^2")
        rest_np = rest_np - args.lr * rest.grad.numpy()
        tape.zero()
    print("line lengths:", np.array2string(rest_np, precision=2))


if __name__ == "__main__":
    main()
