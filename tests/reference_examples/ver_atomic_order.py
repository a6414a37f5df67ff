"""verification §8: the order of an atomic float32 sum moves the result at float level, never by O(1)."""

import json

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

N = 100_000


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, x[wp.tid()])


values = np.random.default_rng(0).uniform(-1.0, 1.0, N).astype(np.float32)
exact = float(np.sum(values.astype(np.float64)))
sums = []
for seed in range(5):  # the same numbers added in another order, as threads on a GPU may add them
    order = np.random.default_rng(seed + 1).permutation(N)
    loss = wp.zeros(1, dtype=float)
    wp.launch(total, dim=N, inputs=[wp.array(values[order], dtype=float)], outputs=[loss])
    sums.append(float(loss.numpy()[0]))
print(json.dumps({"sums": sums, "exact": exact, "relative_spread": (max(sums) - min(sums)) / abs(exact)}))
