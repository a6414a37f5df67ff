"""Choose the stiffness of each of the 15 rope sections so the guy rope hangs in the surveyed shape,
with a smoothness penalty on neighbouring sections."""

import numpy as np
import warp as wp

from rope import SEGMENTS, Rope

SMOOTH = 1e-6


@wp.kernel
def smoothness(k: wp.array(dtype=float), weight: float, loss: wp.array(dtype=float)):
    s = wp.tid()
    d = k[s + 1] - k[s]
    wp.atomic_add(loss, 0, weight * d * d)


@wp.kernel
def add(a: wp.array(dtype=float), b: wp.array(dtype=float), out: wp.array(dtype=float)):
    out[0] = a[0] + b[0]


def objective(rope, k):
    reg = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(smoothness, dim=SEGMENTS - 1, inputs=[k, SMOOTH], outputs=[reg])
    total = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(add, dim=1, inputs=[rope.sag_error(), reg], outputs=[total])
    return total


def loss_and_grad(rope, k_np):
    k = wp.array(k_np, dtype=float, requires_grad=True)
    rope.set_stiffness(k)
    tape = wp.Tape()
    with tape:
        total = objective(rope, k)
    tape.backward(total)
    return float(total.numpy()[0]), k.grad.numpy()


def initial_stiffness():
    # the middle sections are the reinforced webbing from the previous season
    k_np = np.full(SEGMENTS, 150.0, dtype=np.float32)
    k_np[6:9] = 240.0
    return k_np


def main(iters=15, lr=5.0e4):
    rope = Rope()
    k_np = initial_stiffness()
    for it in range(iters):
        value, g = loss_and_grad(rope, k_np)
        print(f"iter {it:2d}  objective {value:.6f}")
        k_np = np.clip(k_np - lr * g, 5.0, None).astype(np.float32)
    print("stiffness:", np.round(k_np, 1))

if __name__ == "__main__":
    main()
