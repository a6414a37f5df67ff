"""verification: warp.autograd gradcheck / gradcheck_tape and the ways they mislead."""

import contextlib
import io
import json

import numpy as np
import warp as wp
import warp.autograd  # not imported by `import warp`: wp.autograd alone raises AttributeError

wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def refill(x: wp.array(dtype=float), value: float):
    x[wp.tid()] = value


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, y[wp.tid()])


@wp.kernel(enable_backward=False)
def square_nobwd(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def advance(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] + 1.0


def check(fn, *args, **kwargs):
    """Run a warp.autograd check; return (result or exception text, number of table rows it printed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            result = fn(*args, **kwargs)
        except ValueError as e:
            result = f"ValueError: {e}"
    rows = [ln for ln in out.getvalue().splitlines() if ln.rstrip().endswith("|") and "Pass" not in ln]
    return result, len(rows)


def overwrite_forward(x):
    """End-to-end forward of the quick-checks §1 bug: x is refilled after square() read it."""
    y = wp.zeros(3, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(square, dim=3, inputs=[x], outputs=[y])
    wp.launch(total, dim=3, inputs=[y], outputs=[loss])
    wp.launch(refill, dim=3, inputs=[x, 5.0])
    return loss


def clean_forward(x):
    y = wp.zeros(3, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(square, dim=3, inputs=[x], outputs=[y])
    wp.launch(total, dim=3, inputs=[y], outputs=[loss])
    return loss


def detached_forward(x):
    loss = wp.zeros(1, dtype=float)  # BUG in the harness: the output has no requires_grad
    wp.launch(total, dim=3, inputs=[x], outputs=[loss])
    return loss


def mutating_forward(x):
    wp.launch(advance, dim=3, inputs=[x])  # the forward changes its own input, like a sim advancing state
    return clean_forward(x)


def sum_forward(x):
    y = wp.zeros(x.shape[0], dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(square, dim=x.shape[0], inputs=[x], outputs=[y])
    wp.launch(total, dim=x.shape[0], inputs=[y], outputs=[loss])
    return loss


def x3():
    return wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True)


gc = warp.autograd.gradcheck
end_to_end_bug = check(gc, overwrite_forward, inputs=[x3()], raise_exception=False)
end_to_end_clean = check(gc, clean_forward, inputs=[x3()], raise_exception=False)
vacuous = check(gc, detached_forward, inputs=[x3()], raise_exception=True)
restored = check(gc, mutating_forward, inputs=[x3()], raise_exception=False, restore_inputs=True)
not_restored = check(gc, mutating_forward, inputs=[x3()], raise_exception=False, restore_inputs=False)
big = wp.array(np.random.default_rng(0).uniform(1.0, 2.0, 64), dtype=float, requires_grad=True)
float32_sum = check(gc, sum_forward, inputs=[big], raise_exception=False)

# Cost: one recording run, one reference run, then two runs per perturbed input scalar.
calls = []
check(gc, lambda x: calls.append(1) or clean_forward(x), inputs=[x3()], raise_exception=False)
jacobians = warp.autograd.jacobian(clean_forward, inputs=[x3()])  # {(input, output): (outputs, inputs)}

# Per-launch checks on the recorded tape of the buggy program.
x = x3()
tape = wp.Tape()
with tape:
    loss = overwrite_forward(x)
crash = check(warp.autograd.gradcheck_tape, tape, raise_exception=False)  # refill has no outputs=
per_launch = check(warp.autograd.gradcheck_tape, tape, raise_exception=False, blacklist_kernels=[refill.key])

x, y, loss = x3(), wp.zeros(3, dtype=float, requires_grad=True), wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(square_nobwd, dim=3, inputs=[x], outputs=[y])
    wp.launch(total, dim=3, inputs=[y], outputs=[loss])
skipped = check(warp.autograd.gradcheck_tape, tape, raise_exception=False)

# tape.visualize() returns GraphViz dot text; recorded copies are not drawn.
x, y, loss = x3(), wp.zeros(3, dtype=float, requires_grad=True), wp.zeros(1, dtype=float, requires_grad=True)
y_copy = wp.zeros(3, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(square, dim=3, inputs=[x], outputs=[y])
    wp.copy(y_copy, y)
    wp.launch(total, dim=3, inputs=[y_copy], outputs=[loss])
dot = tape.visualize()

print(
    json.dumps(
        {
            "forward_calls_for_3_inputs": len(calls),
            "jacobian_shapes": {str(k): list(v.shape) for k, v in jacobians.items()},
            "launches_recorded": len(tape.launches),
            "dot_kernels": [k for k in ("square", "total") if k in dot],
            "dot_mentions_copy": "copy" in dot.lower(),
            "end_to_end_bug": end_to_end_bug,
            "end_to_end_clean": end_to_end_clean,
            "vacuous": vacuous,
            "restored": restored,
            "not_restored": not_restored,
            "float32_sum_64": float32_sum,
            "tape_crash": crash,
            "tape_per_launch": per_launch,
            "tape_backward_disabled": skipped,
        }
    )
)
