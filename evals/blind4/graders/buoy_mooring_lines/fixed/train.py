"""Set the six mooring line lengths so each buoy rides at its survey station after 1.5 s."""

import numpy as np
import warp as wp
import warp.optim

from mooring import BUOYS, Mooring


class Trainer:
    def __init__(self, lr=0.02):
        self.mooring = Mooring()
        self.length = wp.array(np.full(BUOYS, 2.8, dtype=np.float32), dtype=float, requires_grad=True)
        self.opt = warp.optim.SGD([self.length], lr=lr, momentum=0.5)
        self.grads = [self.length.grad]

    def step(self):
        # start from a clean gradient buffer (the one the optimizer holds)
        self.length.grad.zero_()
        tape = wp.Tape()
        with tape:
            loss = self.mooring.drift(self.length)
        tape.backward(loss)
        self.opt.step(self.grads)
        return float(loss.numpy()[0])


def main(iters=25):
    trainer = Trainer()
    for it in range(iters):
        err = trainer.step()
        print(f"iter {it:2d}  station error {err:.5f}")
    print("line lengths:", np.round(trainer.length.numpy(), 3))


if __name__ == "__main__":
    main()
