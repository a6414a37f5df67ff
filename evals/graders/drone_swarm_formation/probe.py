"""Probe: per-drone thrust is optimized; the loss is the formation error after the full flight."""

import fit_thrusters as ft


def params():
    return {"thrust": ft.THRUST}


def loss():
    return ft.rollout_loss(ft.THRUST)


def grad():
    tape = ft.rollout_grad(ft.THRUST)
    g = ft.THRUST.grad.numpy().copy()
    tape.zero()
    return {"thrust": g}
