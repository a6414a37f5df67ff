"""Probe: per-segment stiffness is optimized; the loss is the final-frame capture error."""

import calibrate_rope as cr


def params():
    return {"stiffness": cr.STIFFNESS}


def loss():
    return cr.capture_loss(cr.STIFFNESS)


def grad():
    tape = cr.capture_grad(cr.STIFFNESS)
    g = cr.STIFFNESS.grad.numpy().copy()
    tape.zero()
    return {"stiffness": g}
