"""Probe: the per-robot commands are optimized; the loss is the fleet spread plus effort."""

import rally


def params():
    return {"command": rally.COMMAND}


def loss():
    return rally.spread_loss()


def grad():
    tape = rally.spread_grad()
    g = rally.COMMAND.grad.numpy().copy()
    tape.zero()
    return {"command": g}
