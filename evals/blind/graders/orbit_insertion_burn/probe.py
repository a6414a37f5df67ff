"""Probe: the burn delta-v per craft; loss = orbit miss + FUEL_WEIGHT * delta-v^2, the printed cost.

loss() replays apply_burn / kepler_step / circularization_terms in numpy float64; grad() is the
program's hand-seeded backward (cost_gradient), what the numpy update consumes at iteration 0.
"""

import numpy as np
import plan_burns as pb
import warp as wp

DV = wp.array(pb.dv_init, dtype=wp.vec2, requires_grad=True)


def params():
    return {"dv": DV}


def loss():
    dv = DV.numpy().astype(np.float64)
    r = pb.r0_np.astype(np.float64)
    v = pb.v0_np.astype(np.float64) + dv
    for _ in range(pb.STEPS):
        d2 = np.sum(r * r, axis=1, keepdims=True)
        v = v + (-pb.MU / (d2 * np.sqrt(d2)) * r) * pb.DT
        r = r + v * pb.DT
    dist = np.linalg.norm(r, axis=1)
    rhat = r / dist[:, None]
    that = np.stack([-rhat[:, 1], rhat[:, 0]], 1)
    e_r = dist - pb.TARGET_RADIUS
    e_vr = np.sum(v * rhat, 1)
    e_vt = np.sum(v * that, 1) - np.sqrt(pb.MU / pb.TARGET_RADIUS)
    miss = np.sum(e_r**2 + e_vr**2 + e_vt**2)
    return float(miss + pb.FUEL_WEIGHT * np.sum(dv * dv))


def grad():
    _, _, _, g = pb.cost_gradient(DV)
    return {"dv": g}
