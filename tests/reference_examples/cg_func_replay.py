"""custom-gradients §3: a function that reserves slots with an atomic counter needs a wp.func_replay."""

import json

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

N = 4


@wp.func
def reserve(counter: wp.array(dtype=int), slots: wp.array(dtype=int), tid: int):
    idx = wp.atomic_add(counter, 0, 1)
    slots[tid] = idx  # remember which slot this thread got ...
    return idx


@wp.func_replay(reserve)
def replay_reserve(counter: wp.array(dtype=int), slots: wp.array(dtype=int), tid: int):
    return slots[tid]  # ... so the backward replay reuses it instead of counting again


@wp.func
def reserve_no_replay(counter: wp.array(dtype=int), slots: wp.array(dtype=int), tid: int):
    idx = wp.atomic_add(counter, 0, 1)
    slots[tid] = idx
    return idx


@wp.kernel
def gather(
    src: wp.array(dtype=float),
    counter: wp.array(dtype=int),
    slots: wp.array(dtype=int),
    out: wp.array(dtype=float),
):
    tid = wp.tid()
    idx = reserve(counter, slots, tid)
    out[idx] = src[idx] * src[idx]


@wp.kernel
def gather_no_replay(
    src: wp.array(dtype=float),
    counter: wp.array(dtype=int),
    slots: wp.array(dtype=int),
    out: wp.array(dtype=float),
):
    tid = wp.tid()
    idx = reserve_no_replay(counter, slots, tid)  # BUG: the replay draws slots N..2N-1
    out[idx] = src[idx] * src[idx]


@wp.kernel
def gather_inline(
    src: wp.array(dtype=float),
    counter: wp.array(dtype=int),
    slots: wp.array(dtype=int),
    out: wp.array(dtype=float),
):
    idx = wp.atomic_add(counter, 0, 1)  # BUG: the counter directly in the kernel body, no replay possible
    out[idx] = src[idx] * src[idx]


def run(kernel):
    # Sized 2N only so that the buggy replay's slots N..2N-1 stay inside memory we own: in a real
    # program they index past the end of the arrays.
    src = wp.array(np.full(2 * N, 2.0), dtype=float, requires_grad=True)
    out = wp.zeros(2 * N, dtype=float, requires_grad=True)
    counter, slots = wp.zeros(1, dtype=int), wp.zeros(N, dtype=int)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=N, inputs=[src, counter, slots], outputs=[out])
    tape.backward(grads={out: wp.ones(2 * N, dtype=float)})
    return {"src_grad": src.grad.numpy().tolist(), "counter_after_backward": int(counter.numpy()[0])}


print(
    json.dumps(
        {
            "with_replay": run(gather),
            "without_replay": run(gather_no_replay),
            "inline_counter": run(gather_inline),
        }
    )
)
