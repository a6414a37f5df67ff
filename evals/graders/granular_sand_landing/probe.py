"""FD probe: throw velocities, the landing error at the end of the run, the loop's gradient."""

import landing
import warp as wp


def params():
    return {"throw": landing.throw}


def loss():
    return float(landing.run().numpy()[0])


def grad():
    tape = wp.Tape()
    with tape:
        landing.run()
    tape.backward(landing.loss)
    g = landing.throw.grad.numpy().copy()
    tape.zero()
    return {"throw": g}
