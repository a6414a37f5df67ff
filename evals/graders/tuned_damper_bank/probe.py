"""FD probe: per-damper retention, the full-trace misfit, the loop's gradient."""

import warp as wp
from dampers import DamperBank

_bank = DamperBank()
_bank.load_recordings()


def params():
    return {"retention": _bank.retention}


def loss():
    return float(_bank.forward().numpy()[0])


def grad():
    tape = wp.Tape()
    with tape:
        _bank.forward()
    tape.backward(_bank.loss)
    g = _bank.retention.grad.numpy().copy()
    tape.zero()
    return {"retention": g}
