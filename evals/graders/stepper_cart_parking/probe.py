"""Probe: the command sequence is optimized; the loss is the parking error."""

import plan_stepper as ps


def params():
    return {"command": ps.COMMAND}


def loss():
    return ps.park_loss()


def grad():
    tape = ps.park_grad()
    g = ps.COMMAND.grad.numpy().copy()
    tape.zero()
    return {"command": g}
