"""Probe: the nozzle (speed, pitch, yaw) is optimized; the loss is the spread of plate hits."""

import aim_spray


def params():
    return {"nozzle": aim_spray.NOZZLE}


def loss():
    return aim_spray.spray_loss(aim_spray.NOZZLE)


def grad():
    tape = aim_spray.spray_grad(aim_spray.NOZZLE)
    g = aim_spray.NOZZLE.grad.numpy().copy()
    tape.zero()
    return {"nozzle": g}
