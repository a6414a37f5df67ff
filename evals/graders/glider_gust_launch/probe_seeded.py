"""Seed-pinned probe: the same objective with the gust seed fixed, which is how a correct
verification pins a stochastic forward. Used to show the gradients are correct."""

import glider

SEED = 1234


def params():
    return {"v0": glider.V0}


def loss():
    return glider.objective(seed=SEED)


def grad():
    tape = glider.objective_grad(seed=SEED)
    g = glider.V0.grad.numpy().copy()
    tape.zero()
    return {"v0": g}
