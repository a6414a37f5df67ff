"""Fit per-balloon drag coefficients to the altimeter logs of eight sounding balloons."""

import argparse

import numpy as np
import warp as wp

from balloon.model import altimeter_error, ascent_step

wp.config.log_level = wp.LOG_WARNING

N = 8
STEPS = 80
DT = 0.1

rng = np.random.default_rng(42)
lift = wp.array(rng.uniform(1.5, 2.5, N).astype(np.float32), dtype=float)
true_drag = rng.uniform(0.05, 0.2, N).astype(np.float32)
h0 = np.zeros(N, dtype=np.float32)
v0 = np.zeros(N, dtype=np.float32)


def fly(drag, steps=STEPS):
    """Altitude of every balloon after each step (forward only)."""
    h = wp.array(h0, dtype=float)
    v = wp.array(v0, dtype=float)
    out = []
    for _ in range(steps):
        h_new = wp.zeros(N, dtype=float)
        v_new = wp.zeros(N, dtype=float)
        wp.launch(ascent_step, dim=N, inputs=[h, v, drag, lift, DT], outputs=[h_new, v_new])
        out.append(h_new.numpy().copy())
        h, v = h_new, v_new
    return out


logs = [wp.array(a, dtype=float) for a in fly(wp.array(true_drag, dtype=float))]


def misfit(drag, steps=STEPS):
    """Time-averaged squared altimeter error over the whole flight."""
    heights = fly(drag, steps)
    return float(sum(np.mean((hh - lg.numpy()) ** 2) for hh, lg in zip(heights, logs)) / steps)


def misfit_and_grad(drag, steps=STEPS):
    h = wp.array(h0, dtype=float, requires_grad=True)
    v = wp.array(v0, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(steps):
            h_new = wp.zeros(N, dtype=float, requires_grad=True)
            v_new = wp.zeros(N, dtype=float, requires_grad=True)
            wp.launch(ascent_step, dim=N, inputs=[h, v, drag, lift, DT], outputs=[h_new, v_new])
            wp.launch(altimeter_error, dim=N, inputs=[h_new, logs[t], 1.0 / (N * steps)], outputs=[loss])
            h, v = h_new, v_new
    tape.backward(loss)
    grad = drag.grad.numpy().astype(np.float64)
    total = float(loss.numpy()[0])
    tape.zero()
    return total, grad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--lr", type=float, default=3e-4)
    args = ap.parse_args()

    cd = np.full(N, 0.1)
    for it in range(args.iters):
        drag = wp.array(cd.astype(np.float32), dtype=float, requires_grad=True)
        loss, g = misfit_and_grad(drag)
        print(f"iter {it:2d}  altitude misfit {loss:.4f} m^2   drag error {np.abs(cd - true_drag).max():.4f}")
        cd = np.clip(cd - args.lr * g, 0.01, None)
    print(f"final misfit {misfit(wp.array(cd.astype(np.float32), dtype=float)):.4f}")


if __name__ == "__main__":
    main()
