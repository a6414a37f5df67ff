"""FD probe: the wind vector, the summed tracking error over the whole fall, the loop's gradient."""

from train_wind import WindFit

_fit = WindFit()
_fit.record_track()


def params():
    return {"wind": _fit.wind}


def loss():
    return _fit.objective()


def grad():
    return {"wind": _fit.gradient()}
