import warp as wp


@wp.kernel
def circularization_terms(
    r: wp.array(dtype=wp.vec2),
    v: wp.array(dtype=wp.vec2),
    dv: wp.array(dtype=wp.vec2),
    radius: float,
    mu: float,
    terms: wp.array(dtype=float),
):
    """terms[0]: miss of the target circular orbit, terms[1]: delta-v spent."""
    i = wp.tid()
    ri = r[i]
    dist = wp.length(ri)
    rhat = ri / dist
    v_circ = wp.sqrt(mu / radius)
    that = wp.vec2(-rhat[1], rhat[0])
    e_r = dist - radius
    e_vr = wp.dot(v[i], rhat)
    e_vt = wp.dot(v[i], that) - v_circ
    wp.atomic_add(terms, 0, e_r * e_r + e_vr * e_vr + e_vt * e_vt)
    wp.atomic_add(terms, 1, wp.dot(dv[i], dv[i]))
