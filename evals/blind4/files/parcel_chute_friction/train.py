"""Pick the friction of the six chute liner sections so each parcel stops at its bay."""

import numpy as np
import warp as wp

from chute import SECTIONS, Chute, checkpointed_grad


def initial_friction():
    return np.full(SECTIONS, 0.6, dtype=np.float32)


def main(iters=20, lr=0.01):
    chute = Chute()
    mu_np = initial_friction()
    for it in range(iters):
        mu = wp.array(mu_np, dtype=float, requires_grad=True)
        err, g = checkpointed_grad(chute, mu)
        print(f"iter {it:2d}  stop error {err:.5f}")
        mu_np = np.clip(mu_np - lr * g, 0.0, 2.0).astype(np.float32)
    print("section friction:", np.round(mu_np, 3))


if __name__ == "__main__":
    main()
