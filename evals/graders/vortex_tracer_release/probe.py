"""FD probe: release velocities, the mean squared probe error after the full drift, the loop's gradient."""

import release
import warp as wp


def params():
    return {"v0": release.v0}


def loss():
    return float(release.objective().numpy()[0])


def grad():
    tape = wp.Tape()
    with tape:
        release.objective()
    tape.backward(release.loss)
    g = release.v0.grad.numpy().copy()
    tape.zero()
    return {"v0": g}
