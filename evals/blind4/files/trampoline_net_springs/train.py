"""Fit the stiffness of each of the 40 trampoline springs so the net sags into the design shape
under a 3 kg test weight."""

import numpy as np
import warp as wp

from net import Net


def main(iters=20, lr=1.0e4):
    net = Net()
    k = wp.array(np.full(net.n_springs, 60.0, dtype=np.float32), dtype=float, requires_grad=True)
    for it in range(iters):
        tape = wp.Tape()
        with tape:
            loss = net.sag(k)
        tape.backward(loss)
        print(f"iter {it:2d}  sag error {loss.numpy()[0]:.6f}")
        k = wp.array(np.clip(k.numpy() - lr * k.grad.numpy(), 5.0, None), dtype=float, requires_grad=True)
    print("stiffness range:", float(k.numpy().min()), float(k.numpy().max()))


if __name__ == "__main__":
    main()
