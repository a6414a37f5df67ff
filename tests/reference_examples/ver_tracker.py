"""verification: what the overwrite tracker reports, when it needs a tape, and what it cannot see."""

import json
import warnings

import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.config.verify_autograd_array_access = True  # set before any kernel of this module loads


class Collect:
    """A Warp logger that keeps warning texts (warnings.catch_warnings() records nothing here)."""

    def __init__(self):
        self.warnings = []

    def debug(self, msg):
        pass

    def info(self, msg):
        pass

    def warning(self, msg, category=None, stacklevel=1):
        self.warnings.append(str(msg))

    def error(self, msg):
        pass


@wp.kernel
def bump_in_place(a: wp.array(dtype=float)):
    i = wp.tid()
    v = a[i]
    a[i] = v + 1.0  # read, then write, inside one kernel: reported when the module is built


@wp.kernel
def read_right(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


@wp.kernel
def read_left(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0  # x only appears as a LEFT operand: the tracker does not mark it read


@wp.kernel
def scale_by(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    a[i] *= b[i]  # counted as a write only, and no intra-kernel report either


@wp.kernel
def fill(x: wp.array(dtype=float)):
    x[wp.tid()] = 0.0


@wp.struct
class State:
    x: wp.array(dtype=float)


@wp.kernel
def read_struct(s: State, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * s.x[i]


@wp.kernel
def fill_struct(s: State):
    s.x[wp.tid()] = 0.0


def arrays():
    return (wp.ones(2, dtype=float, requires_grad=True), wp.zeros(2, dtype=float, requires_grad=True))


def overwrite_after(reader, use_tape=True):
    """Launch `reader`, then overwrite its input; return the warnings the tracker produced."""
    x, y = arrays()
    log = Collect()
    with wp.ScopedLogger(log):
        tape = wp.Tape()
        if use_tape:
            with tape:
                wp.launch(reader, dim=2, inputs=[x], outputs=[y])
                wp.launch(fill, dim=2, inputs=[x])
        else:
            wp.launch(reader, dim=2, inputs=[x], outputs=[y])
            wp.launch(fill, dim=2, inputs=[x])
    return log.warnings


def codegen_warnings():
    log = Collect()
    with wp.ScopedLogger(log):
        wp.load_module(device="cpu")  # builds this module: intra-kernel checks run here, no tape involved
    return log.warnings


def struct_case():
    x, y = arrays()
    s = State()
    s.x = x
    log = Collect()
    with wp.ScopedLogger(log), wp.Tape():
        wp.launch(read_struct, dim=2, inputs=[s], outputs=[y])
        wp.launch(fill_struct, dim=2, inputs=[s])
    return log.warnings


def inplace_case():
    a, b = arrays()
    log = Collect()
    with wp.ScopedLogger(log), wp.Tape():
        wp.launch(scale_by, dim=2, inputs=[a, b])  # a[i] *= b[i] reads a, but only the write is recorded ...
        wp.launch(fill, dim=2, inputs=[a])  # ... so overwriting a afterwards is not reported
    return log.warnings


def after_backward_case():
    """Reuse an array after backward: read flags are cleared by backward() (1.17+), so no false alarm."""
    x, y = arrays()
    log = Collect()
    with wp.ScopedLogger(log):
        tape = wp.Tape()
        with tape:
            wp.launch(read_right, dim=2, inputs=[x], outputs=[y])
        tape.backward(grads={y: wp.ones(2, dtype=float)})
        with wp.Tape():
            wp.launch(fill, dim=2, inputs=[x])  # the next iteration refills x
    return log.warnings


def after_reset_case(x_has_grad):
    """Before 1.17 backward() kept the read flags; reset() cleared them only for arrays with gradients."""
    x = wp.ones(2, dtype=float, requires_grad=x_has_grad)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    log = Collect()
    with wp.ScopedLogger(log):
        tape = wp.Tape()
        with tape:
            wp.launch(read_right, dim=2, inputs=[x], outputs=[y])
        tape.backward(grads={y: wp.ones(2, dtype=float)})
        tape.reset()
        with wp.Tape():
            wp.launch(fill, dim=2, inputs=[x])
    return log.warnings


def catch_warnings_case():
    """With Warp's default logger, the standard-library recorder sees none of the tracker's warnings."""
    x, y = arrays()
    with warnings.catch_warnings(record=True) as recorded:
        warnings.simplefilter("always")
        with wp.Tape():
            wp.launch(read_right, dim=2, inputs=[x], outputs=[y])
            wp.launch(fill, dim=2, inputs=[x])  # printed to stderr, but not recorded
    return [str(w.message) for w in recorded]


def alias_case():
    x, y = arrays()
    alias = wp.array(ptr=x.ptr, shape=x.shape, dtype=float, device=x.device)  # same memory, new object
    log = Collect()
    with wp.ScopedLogger(log), wp.Tape():
        wp.launch(read_right, dim=2, inputs=[x], outputs=[y])
        wp.launch(fill, dim=2, inputs=[alias])  # overwrites x through the alias
    return log.warnings


def copy_case(with_grads):
    src = wp.ones(2, dtype=float, requires_grad=with_grads)
    dst = wp.zeros(2, dtype=float, requires_grad=with_grads)
    out = wp.zeros(2, dtype=float, requires_grad=with_grads)
    log = Collect()
    with wp.ScopedLogger(log), wp.Tape():
        wp.launch(read_right, dim=2, inputs=[dst], outputs=[out])
        wp.copy(dst, src)  # overwrites an array already read under the tape
    return log.warnings


print(
    json.dumps(
        {
            "codegen": codegen_warnings(),
            "inter_kernel": overwrite_after(read_right),
            "inter_kernel_no_tape": overwrite_after(read_right, use_tape=False),
            "left_operand": overwrite_after(read_left),
            "struct": struct_case(),
            "ptr_alias": alias_case(),
            "reuse_after_backward": after_backward_case(),
            "reuse_after_reset_with_grad": after_reset_case(True),
            "reuse_after_reset_without_grad": after_reset_case(False),
            "catch_warnings_records": catch_warnings_case(),
            "inplace": inplace_case(),
            "copy_with_grads": copy_case(True),
            "copy_without_grads": copy_case(False),
        }
    )
)
