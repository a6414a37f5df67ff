"""Tune the blade pitch so every blade reaches its target speed across a set of recorded gusts.

Each optimizer update averages nothing: it sums the gradients of the four gust frames (each frame
is simulated and differentiated on its own, the tapes are too long to keep all four at once).
"""

import numpy as np
import warp as wp

from rotor import RotorModel

GUSTS = [5.0, 6.5, 8.0, 9.5]
LR = 3e-5


def initial_pitch(n):
    return wp.array(np.full(n, 0.35, dtype=np.float32), dtype=float, requires_grad=True)


def gradient_step(model, pitch):
    """Run every gust frame; return (summed loss, summed gradient) for one update."""
    grad_accum = np.zeros(model.n, dtype=np.float32)
    total = 0.0
    for wind in GUSTS:
        tape = wp.Tape()
        with tape:
            loss = model.frame(pitch, wind)
        tape.backward(loss)
        total += float(loss.numpy()[0])
        grad_accum += pitch.grad.numpy()
    tape.zero()
    return total, grad_accum


def main():
    wp.init()
    model = RotorModel()
    pitch = initial_pitch(model.n)
    for it in range(12):
        total, g = gradient_step(model, pitch)
        print(f"iter {it:2d}  speed error over {len(GUSTS)} gusts = {total:.4f}")
        pitch.assign(pitch.numpy() - LR * g)
    print("pitch:", np.round(pitch.numpy(), 3))


if __name__ == "__main__":
    main()
