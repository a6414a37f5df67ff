"""Verification probe: the same program with the start positions expressed relative to the
site origin. The spread is translation invariant, so loss and gradient are mathematically identical to
the shipped objective, but float32 no longer cancels ~1e9-sized moment sums, and FD becomes usable."""

import rally

rally.FLEET.start = rally.FLEET.start - rally.SITE_ORIGIN
rally.COMMAND.assign(0.3 * rally.COMMAND.numpy() + 0.5)


def params():
    return {"command": rally.COMMAND}


def loss():
    return rally.spread_loss()


def grad():
    tape = rally.spread_grad()
    g = rally.COMMAND.grad.numpy().copy()
    tape.zero()
    return {"command": g}
