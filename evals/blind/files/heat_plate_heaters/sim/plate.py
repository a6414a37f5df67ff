import numpy as np
import warp as wp


@wp.kernel
def scatter_heaters(q: wp.array(dtype=float), cells: wp.array(dtype=wp.int32, ndim=2), src: wp.array2d(dtype=float)):
    h = wp.tid()
    src[cells[h, 0], cells[h, 1]] = q[h]


@wp.kernel
def diffuse(
    T: wp.array2d(dtype=float),
    src: wp.array2d(dtype=float),
    alpha: float,
    dt: float,
    T_new: wp.array2d(dtype=float),
):
    i, j = wp.tid()
    nx = T.shape[0]
    ny = T.shape[1]
    if i == 0 or j == 0 or i == nx - 1 or j == ny - 1:
        T_new[i, j] = 0.0
        return
    lap = T[i - 1, j] + T[i + 1, j] + T[i, j - 1] + T[i, j + 1] - 4.0 * T[i, j]
    T_new[i, j] = T[i, j] + dt * (alpha * lap + src[i, j])


class Plate:
    """Square plate with fixed-temperature edges and a few point heaters."""

    def __init__(self, n=12, alpha=0.2, dt=0.5, steps=40):
        self.n = n
        self.alpha = alpha
        self.dt = dt
        self.steps = steps
        self.heater_cells = np.array([[3, 3], [3, 8], [6, 5], [8, 2], [8, 8], [5, 9]], dtype=np.int32)
        self.cells = wp.array(self.heater_cells, dtype=wp.int32)

    def run(self, q):
        src = wp.zeros((self.n, self.n), dtype=float, requires_grad=True)
        wp.launch(scatter_heaters, len(self.heater_cells), inputs=[q, self.cells], outputs=[src])
        T = wp.zeros((self.n, self.n), dtype=float, requires_grad=True)
        for _ in range(self.steps):
            T_new = wp.zeros_like(T)
            wp.launch(diffuse, T.shape, inputs=[T, src, self.alpha, self.dt], outputs=[T_new])
            T = T_new
        return T
