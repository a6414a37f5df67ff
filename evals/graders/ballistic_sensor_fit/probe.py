"""Probe: the launch velocities are the optimized parameters; the loss is the sensor error."""

import fit_launch


def params():
    return {"v0": fit_launch.V0}


def loss():
    return fit_launch.evaluate(fit_launch.V0)


def grad():
    _, tape = fit_launch.loss_and_grad(fit_launch.V0)
    g = fit_launch.V0.grad.numpy().copy()
    tape.zero()
    return {"v0": g}
