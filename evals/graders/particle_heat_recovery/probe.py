"""Probe: the initial temperatures are optimized; the loss is probe misfit plus smoothness."""

import recover_heat as rh


def params():
    return {"temp0": rh.TEMP0}


def loss():
    return rh.objective(rh.TEMP0)


def grad():
    tape = rh.objective_grad(rh.TEMP0)
    g = rh.TEMP0.grad.numpy().copy()
    tape.zero()
    return {"temp0": g}
