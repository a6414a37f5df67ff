"""quick-checks §1.3: a copy written back onto an array the tape read is harmless only if no value changes."""

import json

import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.config.verify_autograd_array_access = True


@wp.kernel
def clip(x: wp.array(dtype=float), cap: float, out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.min(x[i], cap)


@wp.kernel
def cube_sum(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i] * x[i])


class Collect:
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


def gradient(cap):
    """d sum(p^3) / dx with p = x = [1, 2]; afterwards p is clipped to `cap` and the clip copied back onto p."""
    x = wp.array([1.0, 2.0], dtype=float, requires_grad=True)
    p = wp.zeros(2, dtype=float, requires_grad=True)
    clipped = wp.zeros(2, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    log = Collect()
    with wp.ScopedLogger(log):
        tape = wp.Tape()
        with tape:
            wp.launch(clip, dim=2, inputs=[x, 100.0], outputs=[p])  # p = x
            wp.launch(cube_sum, dim=2, inputs=[p], outputs=[loss])  # reads p
            wp.launch(clip, dim=2, inputs=[p, cap], outputs=[clipped])
            wp.copy(p, clipped)  # write-back onto p, which cube_sum read
        tape.backward(loss)
    return {"grad": x.grad.numpy().tolist(), "tracker_warnings": len(log.warnings)}


print(json.dumps({"clip_idle": gradient(10.0), "clip_engaged": gradient(1.5), "expected": [3.0, 12.0]}))
