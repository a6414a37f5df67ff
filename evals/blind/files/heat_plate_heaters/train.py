"""Recover the heater powers of a plate from eight thermocouple readings."""

import argparse

import numpy as np
import warp as wp

from losses import sensor_loss
from sim.plate import Plate

wp.config.mode = "release"

SENSORS = np.array([[2, 2], [2, 6], [4, 4], [4, 9], [7, 3], [7, 7], [9, 5], [9, 9]], dtype=np.int32)


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=7)
    return p.parse_args(argv)


def make_readings(plate):
    q_true = np.array([0.8, 0.3, 1.1, 0.5, 0.9, 0.4], dtype=np.float32)
    T = plate.run(wp.array(q_true, dtype=float))
    return wp.array(T.numpy()[SENSORS[:, 0], SENSORS[:, 1]], dtype=float)


def main():
    args = parse_args()
    rng = np.random.default_rng(args.seed)
    plate = Plate()
    sensors = wp.array(SENSORS, dtype=wp.int32)
    readings = make_readings(plate)

    q_np = rng.uniform(0.2, 1.2, size=len(plate.heater_cells)).astype(np.float32)
    for it in range(args.iters):
        q = wp.array(q_np, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            T = plate.run(q)
            loss = sensor_loss(T, sensors, readings)
        tape.backward(loss)
        q_np = q_np - args.lr * q.grad.numpy()
        mse = loss.numpy()[0] / len(SENSORS)
        print(f"[{it}] mean sq sensor error = {mse:.5e}")
    print("heater powers:", np.round(q_np, 3))


if __name__ == "__main__":
    main()
