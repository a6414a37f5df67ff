"""FD probe: per-spring stiffness, the drape error after the full rollout, the loop's gradient."""

import train
from clothsim import ClothSim

_sim = ClothSim()
train.make_target(_sim)


def params():
    return {"stiffness": _sim.stiffness}


def loss():
    return float(_sim.forward().numpy()[0])


def grad():
    return {"stiffness": train.compute_gradient(_sim)}
