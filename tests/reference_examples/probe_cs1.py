"""A probe file for case study 1: the FD driver imports the shipped program and calls into it.

`warpgrad gradcheck --probe probe_cs1.py` drives it; run directly, it does one central difference itself.
"""

import json

import cs1_state_aliasing as program  # the shipped program, imported as is: never copied
import warp as wp

SIM = program.Sim(swap_states=True)
TARGET = program.target_positions()
K = wp.array([1.0], dtype=float, requires_grad=True)


def params():
    """The live arrays the optimizer updates, by name."""
    return {"k": K}


def loss():
    """The full-horizon objective at the current values of params(); every state is rebuilt."""
    return float(SIM.loss(K, TARGET).numpy()[0])


def grad():
    """The gradient the optimizer consumes, from the program's own tape and backward."""
    K.grad.zero_()
    tape = wp.Tape()
    tape.backward(SIM.loss(K, TARGET, tape))
    return {"k": K.grad.numpy().copy()}


if __name__ == "__main__":
    k, eps = params()["k"], 1e-3
    ad, start = float(grad()["k"][0]), k.numpy().copy()
    f = []
    for shift in (eps, -eps):
        k.assign(start + shift)  # perturb the live array in place ...
        f.append(loss())
    k.assign(start)  # ... and restore it
    print(json.dumps({"ad": ad, "fd": (f[0] - f[1]) / (2 * eps), "repeatable": loss() == loss()}))
