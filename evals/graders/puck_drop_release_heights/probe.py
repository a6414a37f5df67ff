"""Probe: the release heights are optimized; the loss is the misfit to the logged heights."""

import drop_test


def params():
    return {"heights": drop_test.HEIGHTS}


def loss():
    return drop_test.misfit()


def grad():
    tape = drop_test.misfit_grad()
    g = drop_test.HEIGHTS.grad.numpy().copy()
    tape.zero()
    return {"heights": g}
