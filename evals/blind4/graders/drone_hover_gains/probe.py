"""Probe: the 8 x 2 PD gains (a torch tensor in train.py, updated by torch.optim.SGD); objective =
the printed fleet tracking error (mean over drones of the integrated squared altitude error).

The probe keeps the gains in a wp.array so the labellers can perturb them; grad() hands them to
the script's fleet_error as a fresh leaf tensor and returns gains.grad after loss.backward() (what
opt.step applies at iteration 0). loss() replays climb_step in numpy float64 (an independent
re-implementation).
"""

import hover_sim as hs
import numpy as np
import torch
import train
import warp as wp

mass = hs.drone_masses()
gains = wp.array(train.initial_gains().numpy(), dtype=float)


def params():
    return {"gains": gains}


def grad():
    g = torch.tensor(gains.numpy(), requires_grad=True)
    train.fleet_error(g, mass).backward()
    return {"gains": g.grad.numpy().astype(np.float64)}


def script_loss():
    return float(train.fleet_error(torch.tensor(gains.numpy()), mass).item())


def loss():
    k = gains.numpy().astype(np.float64)
    m = mass.numpy().astype(np.float64)
    dt = np.float64(np.float32(hs.DT))
    z = np.zeros(hs.N)
    w = np.zeros(hs.N)
    err = np.zeros(hs.N)
    for _ in range(hs.STEPS):
        raw = m * 9.81 + k[:, 0] * (hs.Z_REF - z) - k[:, 1] * w
        a = hs.U_MAX * np.tanh(raw / hs.U_MAX) / m - 9.81 - np.float64(np.float32(0.3)) * w
        w = w + dt * a
        z = z + dt * w
        err += dt * (z - hs.Z_REF) ** 2
    return float(np.mean(err))
