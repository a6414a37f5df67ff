"""quick-checks §1: a write onto an array that a recorded launch read corrupts its adjoint, taped or not."""

import json

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.config.verify_autograd_array_access = True  # must be set before this module's kernels load


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def refill(x: wp.array(dtype=float), value: float):
    i = wp.tid()
    x[i] = value


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, y[wp.tid()])


class Collect:
    """Keeps the tracker's warnings (warnings.catch_warnings() records none of them)."""

    def __init__(self):
        self.warnings = []

    def warning(self, msg, category=None, stacklevel=1):
        self.warnings.append(str(msg))

    def debug(self, msg):
        pass

    def info(self, msg):
        pass

    def error(self, msg):
        pass


def gradient(write):
    """x.grad of sum(x * x) at x = [1, 2, 3] when `write` overwrites x at some point; expected [2, 4, 6]."""
    x = wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    log = Collect()
    with wp.ScopedLogger(log):
        tape = wp.Tape()
        with tape:
            wp.launch(square, dim=3, inputs=[x], outputs=[y])
            wp.launch(total, dim=3, inputs=[y], outputs=[loss])
            if write == "taped":  # e.g. the next step's input refilled inside the tape
                wp.launch(refill, dim=3, inputs=[x, 5.0])
            if write == "record_tape_false":
                wp.launch(refill, dim=3, inputs=[x, 5.0], record_tape=False)
        if write == "untaped_before_backward":
            wp.launch(refill, dim=3, inputs=[x, 5.0])
        if write == "zero_":
            x.zero_()
        if write == "fill_":
            x.fill_(5.0)
        if write == "assign_numpy":
            x.assign(np.full(3, 5.0, dtype=np.float32))
        tape.backward(loss)
        if write == "after_backward":  # the only safe place for the write
            wp.launch(refill, dim=3, inputs=[x, 5.0])
    return {"grad": x.grad.numpy().tolist(), "tracker_warnings": log.warnings}


writes = ("none", "taped", "record_tape_false", "untaped_before_backward", "zero_", "fill_", "assign_numpy")
print(json.dumps({w: gradient(w) for w in (*writes, "after_backward")}))
