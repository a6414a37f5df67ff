import warp as wp


@wp.kernel
def spring_forces(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    springs: wp.array(dtype=int, ndim=2),
    rest: wp.array(dtype=float),
    stiffness: wp.array(dtype=float),
    damping: float,
    f: wp.array(dtype=wp.vec3),
):
    s = wp.tid()
    i = springs[s, 0]
    j = springs[s, 1]
    d = x[j] - x[i]
    length = wp.length(d)
    n = d / length
    rel_v = wp.dot(v[j] - v[i], n)
    fs = (stiffness[s] * (length - rest[s]) + damping * rel_v) * n
    wp.atomic_add(f, i, fs)
    wp.atomic_sub(f, j, fs)
