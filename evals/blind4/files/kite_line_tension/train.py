"""Learn the kite's lift-coefficient schedule (six windows) so it climbs along the reference height."""

import numpy as np
import warp as wp
import warp.optim

from kite import WINDOWS, Kite


class Pilot:
    def __init__(self, lr=0.05):
        self.kite = Kite()
        self.cl = wp.array(np.full(WINDOWS, 0.8, dtype=np.float32), dtype=float, requires_grad=True)
        self.opt = warp.optim.Adam([self.cl], lr=lr)
        self.tape = wp.Tape()

    def step(self):
        with self.tape:
            cl_work = wp.clone(self.cl)
            loss = self.kite.flight_error(cl_work)
        self.tape.backward(loss)
        self.opt.step([self.cl.grad])
        value = float(loss.numpy()[0])
        self.tape.zero()
        self.tape.reset()
        return value


def main(iters=20):
    pilot = Pilot()
    for it in range(iters):
        err = pilot.step()
        print(f"iter {it:2d}  height error {err:.5f}")
    print("lift schedule:", np.round(pilot.cl.numpy(), 3))


if __name__ == "__main__":
    main()
