"""FD probe: the rod conductivities, the full-horizon sensor misfit, the gradient the loop consumes."""

import fit_conductivity

_model = fit_conductivity.RodModel()


def params():
    return {"cond": _model.cond}


def loss():
    return _model.objective()


def grad():
    return {"cond": _model.gradient()}
