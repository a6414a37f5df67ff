"""Probe: the launch velocity is optimized; loss() is the user's objective exactly as written
(it draws a fresh gust seed on every call, so naive FD is inconclusive by design)."""

import glider


def params():
    return {"v0": glider.V0}


def loss():
    return glider.objective()


def grad():
    tape = glider.objective_grad()
    g = glider.V0.grad.numpy().copy()
    tape.zero()
    return {"v0": g}
