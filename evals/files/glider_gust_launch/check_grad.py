"""Sanity check: compare the tape gradient with central differences."""

import numpy as np

import glider

eps = 1.0e-3
tape = glider.objective_grad()
ad = glider.V0.grad.numpy()[0].copy()
tape.zero()
base = glider.V0.numpy().copy()
fd = np.zeros(3)
for k in range(3):
    step = np.zeros_like(base)
    step[0, k] = eps
    glider.V0.assign(base + step)
    plus = glider.objective()
    glider.V0.assign(base - step)
    minus = glider.objective()
    fd[k] = (plus - minus) / (2.0 * eps)
glider.V0.assign(base)
print("autodiff:", ad)
print("finite differences:", fd)
print("max relative error:", float(np.max(np.abs(ad - fd) / np.maximum(np.abs(fd), 1e-8))))
