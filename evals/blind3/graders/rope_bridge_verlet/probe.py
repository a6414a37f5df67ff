"""Probe: the 12 initial plank positions x0 (vec3d, updated in place by assign); objective = shape
error after 90 Verlet steps. The program runs in float64, so its own forward is the float64
objective; grad() is the script's tape at iteration 0 (what the update applies).
"""

import sim
import train
import warp as wp

target = sim.surveyed_shape()
x0 = wp.array(sim.straight_deck(), dtype=wp.vec3d, requires_grad=True)


def params():
    return {"x0": x0}


def grad():
    _, g = train.loss_and_grad(x0, target)
    return {"x0": g}


def loss():
    out = sim.simulate(x0, target)
    return float(out.numpy()[0])
