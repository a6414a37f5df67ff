"""FD probe: initial particle velocities, the frame error at the captured frame, the loop's gradient."""

import warp as wp
from splash import Droplet

_drop = Droplet()
_drop.capture_frame()


def params():
    return {"v0": _drop.v0}


def loss():
    return float(_drop.forward().numpy()[0])


def grad():
    tape = wp.Tape()
    with tape:
        _drop.forward()
    tape.backward(_drop.loss)
    g = _drop.v0.grad.numpy().copy()
    tape.zero()
    return {"v0": g}
