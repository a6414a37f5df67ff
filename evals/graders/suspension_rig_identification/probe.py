"""Probe: stiffness and damping are optimized; the loss is the logged body-travel misfit."""

import calibrate_suspension as cs


def params():
    return {"stiffness": cs.STIFFNESS, "damping": cs.DAMPING}


def loss():
    return cs.tracking_loss()


def grad():
    tape = cs.tracking_grad()
    g = {"stiffness": cs.STIFFNESS.grad.numpy().copy(), "damping": cs.DAMPING.grad.numpy().copy()}
    tape.zero()
    return g
