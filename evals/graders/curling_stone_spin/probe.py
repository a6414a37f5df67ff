"""FD probe: launch velocities and spins, the placement error at the end of the slide, the loop's gradient."""

import warp as wp
from curl import Sheet

_sheet = Sheet()


def params():
    return {"qd0": _sheet.qd0}


def loss():
    return float(_sheet.forward().numpy()[0])


def grad():
    tape = wp.Tape()
    with tape:
        _sheet.forward()
    tape.backward(_sheet.loss)
    g = _sheet.qd0.grad.numpy().copy()
    tape.zero()
    return {"qd0": g}
