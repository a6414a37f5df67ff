"""verification §6: segment checkpointing over a state (x, v); a dropped velocity seed and the per-segment check."""

import json

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

N, STEPS, SEGMENT, DT = 8, 24, 6, 0.1


@wp.kernel
def step(
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    k: wp.array(dtype=float),
    x_out: wp.array(dtype=float),
    v_out: wp.array(dtype=float),
):
    i = wp.tid()
    v_out[i] = v[i] - DT * k[i] * wp.sin(x[i])
    x_out[i] = x[i] + DT * v_out[i]


@wp.kernel
def energy(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, x[wp.tid()] * x[wp.tid()])


def new(values=None):
    return wp.array(np.zeros(N) if values is None else values, dtype=float, requires_grad=True)


def x_init():
    return new(np.linspace(0.5, 1.5, N))


def k_init():
    return new(np.linspace(1.0, 2.0, N))


def rollout(x, v, k, steps):
    """Advance `steps` steps through distinct buffers; return the end state."""
    for _ in range(steps):
        x_next, v_next = new(), new()
        wp.launch(step, dim=N, inputs=[x, v, k], outputs=[x_next, v_next])
        x, v = x_next, v_next
    return x, v


def loss_of(x, v, k, steps):
    loss = new(np.zeros(1))
    wp.launch(energy, dim=N, inputs=[rollout(x, v, k, steps)[0]], outputs=[loss])
    return loss


def one_tape_gradient():
    k, tape = k_init(), wp.Tape()
    with tape:
        loss = loss_of(x_init(), new(), k, STEPS)
    tape.backward(loss)
    return k.grad.numpy().copy()


def checkpointed(seed_velocity=True):
    """Forward without a tape keeping each segment's start; backward one re-recorded segment at a time."""
    k, x, v, starts = k_init(), x_init(), new(), []
    for _ in range(STEPS // SEGMENT):
        starts.append((wp.clone(x), wp.clone(v)))
        x, v = rollout(x, v, k, SEGMENT)
    seeds, seeded = None, []
    for saved_x, saved_v in reversed(starts):
        x0, v0 = wp.clone(saved_x, requires_grad=True), wp.clone(saved_v, requires_grad=True)
        tape = wp.Tape()
        with tape:
            if seeds is None:
                loss = loss_of(x0, v0, k, SEGMENT)
            else:
                x_end, v_end = rollout(x0, v0, k, SEGMENT)
        if seeds is None:
            tape.backward(loss)
        else:
            # BUG when seed_velocity is False: only the position adjoint crosses the segment boundary.
            tape.backward(
                grads={x_end: seeds[0], v_end: seeds[1] if seed_velocity else wp.zeros_like(seeds[1])}
            )
        seeds = (wp.clone(x0.grad), wp.clone(v0.grad))
        seeded.append((x0.numpy(), v0.numpy(), seeds[0].numpy(), seeds[1].numpy()))
    return k.grad.numpy().copy(), seeded[::-1]


def per_segment_errors(seeded, eps=1e-2):
    """At each segment start: the seeded adjoint against FD of the rest of the rollout, along one direction."""
    k, errors = k_init(), []
    for s, (x0, v0, gx, gv) in enumerate(seeded):
        d = np.random.default_rng(s).normal(size=2 * N)
        ad = float(gx @ d[:N] + gv @ d[N:])
        f = [
            float(loss_of(new(x0 + e * d[:N]), new(v0 + e * d[N:]), k, STEPS - s * SEGMENT).numpy()[0])
            for e in (eps, -eps)
        ]
        fd = (f[0] - f[1]) / (2 * eps)
        errors.append(round(abs(ad - fd) / abs(fd), 4))
    return errors


full = one_tape_gradient()
good, good_seeds = checkpointed(seed_velocity=True)
bad, bad_seeds = checkpointed(seed_velocity=False)
print(
    json.dumps(
        {
            "good_max_abs_diff": float(np.abs(full - good).max()),
            "bad_rel_err": float(np.abs(full - bad).max() / np.abs(full).max()),
            "good_per_segment": per_segment_errors(good_seeds),
            "bad_per_segment": per_segment_errors(bad_seeds),
            "states_kept_full": STEPS + 1,
            "states_kept_checkpointed": STEPS // SEGMENT + SEGMENT + 1,
        }
    )
)
