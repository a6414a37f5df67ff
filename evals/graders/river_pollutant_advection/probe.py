"""FD probe: per-cell flow speed, the sample misfit after the full release, the loop's gradient."""

import river
import warp as wp


def params():
    return {"speed": river.speed}


def loss():
    return float(river.compute_loss().numpy()[0])


def grad():
    tape = wp.Tape()
    with tape:
        river.compute_loss()
    tape.backward(river.loss)
    g = river.speed.grad.numpy().copy()
    tape.zero()
    return {"speed": g}
