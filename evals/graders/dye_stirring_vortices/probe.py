"""Probe: the vortex strengths are optimized over the production horizon (config.HORIZON)."""

import fit_vortices as fv


def params():
    return {"strengths": fv.STRENGTHS}


def loss():
    return fv.camera_loss()


def grad():
    tape = fv.camera_grad()
    g = fv.STRENGTHS.grad.numpy().copy()
    tape.zero()
    return {"strengths": g}
