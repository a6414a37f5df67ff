"""FD probe: launch velocities, the total squared miss, the gradient the third optimizer step consumes."""

import aim

ITERATION = 3


def params():
    return {"v0": aim.battery.v0}


def loss():
    return float(aim.battery.forward().numpy()[0])


def grad():
    # The loop asks for a gradient once per iteration; reproduce the one consumed at ITERATION.
    for _ in range(ITERATION):
        g = aim.battery.gradient()
    return {"v0": g}
