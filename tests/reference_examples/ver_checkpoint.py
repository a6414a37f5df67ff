"""verification: segment checkpointing (store a few states, re-record one segment at a time in backward)."""

import json

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

N, STEPS, SEGMENT, DT = 8, 24, 6, 0.1


@wp.kernel
def step(x: wp.array(dtype=float), k: wp.array(dtype=float), x_out: wp.array(dtype=float)):
    i = wp.tid()
    x_out[i] = x[i] + DT * wp.sin(k[i] * x[i])


@wp.kernel
def energy(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


def x_init():
    return wp.array(np.linspace(0.5, 1.5, N), dtype=float, requires_grad=True)


def k_init():
    return wp.array(np.linspace(1.0, 2.0, N), dtype=float, requires_grad=True)


def full_tape_gradient():
    """Reference: one tape, STEPS + 1 buffers alive at once."""
    k, xs = k_init(), [x_init()] + [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(STEPS):
            wp.launch(step, dim=N, inputs=[xs[t], k], outputs=[xs[t + 1]])
        wp.launch(energy, dim=N, inputs=[xs[STEPS]], outputs=[loss])
    tape.backward(loss)
    return k.grad.numpy()


def run_segment(start, k, tape=None):
    """Advance SEGMENT steps through SEGMENT + 1 distinct buffers (no overwrite inside the segment)."""
    xs = [start] + [wp.zeros(N, dtype=float, requires_grad=True) for _ in range(SEGMENT)]
    for t in range(SEGMENT):
        wp.launch(step, dim=N, inputs=[xs[t], k], outputs=[xs[t + 1]], record_tape=tape is not None)
    return xs[-1]


def checkpointed_gradient():
    k = k_init()
    checkpoints, x = [], x_init()
    for _ in range(STEPS // SEGMENT):  # forward without a tape: keep only each segment's start state
        checkpoints.append(wp.clone(x, requires_grad=False))
        x = run_segment(x, k)
    seed = None
    for start in reversed(checkpoints):  # backward: replay one segment at a time on a fresh tape
        x0 = wp.clone(start, requires_grad=True)
        tape = wp.Tape()
        with tape:
            end = run_segment(x0, k, tape)
            if seed is None:
                loss = wp.zeros(1, dtype=float, requires_grad=True)
                wp.launch(energy, dim=N, inputs=[end], outputs=[loss])
        if seed is None:
            tape.backward(loss)
        else:
            tape.backward(grads={end: seed})
        seed = wp.clone(x0.grad)  # d loss / d (this segment's start) seeds the previous segment
    return k.grad.numpy()  # k.grad accumulated across all segment tapes


full, ckpt = full_tape_gradient(), checkpointed_gradient()
print(
    json.dumps(
        {
            "max_abs_diff": float(np.abs(full - ckpt).max()),
            "max_abs_grad": float(np.abs(full).max()),
            "states_kept_full": STEPS + 1,
            "states_kept_checkpointed": STEPS // SEGMENT + SEGMENT + 1,
        }
    )
)
