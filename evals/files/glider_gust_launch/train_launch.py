"""Find the launch velocity that minimizes the expected miss distance under gusts."""

import numpy as np

import glider

if __name__ == "__main__":
    lr = 0.05
    for it in range(40):
        tape = glider.objective_grad()
        loss = float(glider.BATCH.loss.numpy()[0])
        glider.V0.assign(glider.V0.numpy() - lr * glider.V0.grad.numpy())
        tape.zero()
        if it % 4 == 0:
            print(f"iter {it:3d}  expected miss {loss:.4f}  v0 {np.round(glider.V0.numpy()[0], 3)}")
