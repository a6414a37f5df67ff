"""FD probe: spring activations, the shape error after the whole rollout, the loop's gradient."""

import warp as wp
from morph import Morph

_morph = Morph()
_morph.scan_target()


def params():
    return {"activation": _morph.activation}


def loss():
    return float(_morph.forward().numpy()[0])


def grad():
    tape = wp.Tape()
    with tape:
        _morph.forward()
    tape.backward(_morph.loss)
    g = _morph.activation.grad.numpy().copy()
    tape.zero()
    return {"activation": g}
