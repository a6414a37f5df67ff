import warp as wp


@wp.kernel
def squared_error(x: wp.array(dtype=float), obs: wp.array(dtype=float), terms: wp.array(dtype=float)):
    i = wp.tid()
    e = x[i] - obs[i]
    terms[i] = e * e


@wp.kernel
def mean_of(terms: wp.array(dtype=float), inv_n: float, out: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(out, 0, terms[i] * inv_n)


def per_grain_error(depth, obs):
    terms = wp.zeros(depth.shape[0], dtype=float, requires_grad=True)
    wp.launch(squared_error, depth.shape[0], inputs=[depth, obs], outputs=[terms])
    return terms


def mean(terms):
    out = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(mean_of, terms.shape[0], inputs=[terms, 1.0 / terms.shape[0]], outputs=[out])
    return out
