"""FD probe: joint angles of every pose, the mean reach error, the loop's gradient."""

from solve_ik import BatchIK

_ik = BatchIK()


def params():
    return {"angles": _ik.angles}


def loss():
    return _ik.mean_error()


def grad():
    return {"angles": _ik.gradient()}
