"""quick-checks §8: a tape per step with state carried between tapes optimizes a truncated objective."""

import json

import warp as wp

wp.config.log_level = wp.LOG_WARNING

STEPS = 5


@wp.kernel
def step(x_in: wp.array(dtype=float), k: wp.array(dtype=float), x_out: wp.array(dtype=float)):
    x_out[0] = k[0] * x_in[0]


@wp.kernel
def add_to_loss(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, x[0])


def objective(k_value):
    """The reported objective: sum of the state over the whole horizon (forward only, no tape)."""
    k = wp.array([k_value], dtype=float)
    states = [wp.array([1.0], dtype=float)] + [wp.zeros(1, dtype=float) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float)
    for t in range(STEPS):
        wp.launch(step, dim=1, inputs=[states[t], k], outputs=[states[t + 1]])
        wp.launch(add_to_loss, dim=1, inputs=[states[t + 1]], outputs=[loss])
    return float(loss.numpy()[0])


def tape_per_step(k_value):
    """BUG: backward inside the loop; the state enters each tape as a constant."""
    k = wp.array([k_value], dtype=float, requires_grad=True)
    x = wp.array([1.0], dtype=float, requires_grad=True)
    for _ in range(STEPS):
        x_next = wp.zeros(1, dtype=float, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(step, dim=1, inputs=[x, k], outputs=[x_next])
            wp.launch(add_to_loss, dim=1, inputs=[x_next], outputs=[loss])
        tape.backward(loss)  # k.grad accumulates only this step's local term
        x = x_next
    return float(k.grad.numpy()[0])


def one_tape(k_value):
    """Fix: one tape over the whole horizon with STEPS + 1 distinct state buffers."""
    k = wp.array([k_value], dtype=float, requires_grad=True)
    states = [wp.array([1.0], dtype=float, requires_grad=True)]
    states += [wp.zeros(1, dtype=float, requires_grad=True) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(STEPS):
            wp.launch(step, dim=1, inputs=[states[t], k], outputs=[states[t + 1]])
            wp.launch(add_to_loss, dim=1, inputs=[states[t + 1]], outputs=[loss])
    tape.backward(loss)
    return float(k.grad.numpy()[0])


def per_window_fd(k_value, eps=1e-3):
    """What a window-sized check sees: FD of each step's loss with its incoming state held fixed."""
    total, x = 0.0, wp.array([1.0], dtype=float)
    for _ in range(STEPS):
        f = []
        for k_shifted in (k_value + eps, k_value - eps):
            x_next, loss = wp.zeros(1, dtype=float), wp.zeros(1, dtype=float)
            wp.launch(step, dim=1, inputs=[x, wp.array([k_shifted], dtype=float)], outputs=[x_next])
            wp.launch(add_to_loss, dim=1, inputs=[x_next], outputs=[loss])
            f.append(float(loss.numpy()[0]))
        total += (f[0] - f[1]) / (2 * eps)
        x_next = wp.zeros(1, dtype=float)
        wp.launch(step, dim=1, inputs=[x, wp.array([k_value], dtype=float)], outputs=[x_next])
        x = x_next
    return total


k0, eps = 1.1, 1e-3
fd_full = (objective(k0 + eps) - objective(k0 - eps)) / (2 * eps)
print(
    json.dumps(
        {
            "tape_per_step": tape_per_step(k0),
            "per_window_fd": per_window_fd(k0),
            "one_tape": one_tape(k0),
            "fd_full_horizon": fd_full,
        }
    )
)
