import numpy as np
import warp as wp

from .lines import buoy_step, station_error


class MooringField:
    """Buoys held by four tension-only lines each, in a steady current."""

    def __init__(self, centers, spread=8.0, depth=10.0, dt=0.02, steps=150, window=25):
        self.n = len(centers)
        corners = np.array([[1, 1], [1, -1], [-1, 1], [-1, -1]], dtype=np.float64) * spread
        anchors = []
        for c in centers:
            for k in corners:
                anchors.append([c[0] + k[0], c[1] + k[1], -depth])
        self.anchors = wp.array(np.array(anchors, dtype=np.float32), dtype=wp.vec3)
        self.x0 = np.array([[c[0], c[1], 0.0] for c in centers], dtype=np.float32)
        self.k_line = 20.0
        self.beta = 8.0
        self.lift = 3.0
        self.current = wp.vec3(0.4, 0.15, 0.0)
        self.c_quad = 0.8
        self.c_lin = 1.5
        self.dt = dt
        self.steps = steps
        self.window = window

    def loss(self, rest, station):
        x = wp.array(self.x0, dtype=wp.vec3, requires_grad=True)
        v = wp.zeros(self.n, dtype=wp.vec3, requires_grad=True)
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        w = 1.0 / (self.window * self.n)
        for k in range(self.steps):
            xn = wp.zeros_like(x)
            vn = wp.zeros_like(v)
            wp.launch(
                buoy_step,
                dim=self.n,
                inputs=[x, v, self.anchors, rest, self.k_line, self.beta, self.lift, self.current,
                        self.c_quad, self.c_lin, self.dt],
                outputs=[xn, vn],
            )
            x, v = xn, vn
            if k >= self.steps - self.window:
                wp.launch(station_error, dim=self.n, inputs=[x, station, w], outputs=[loss])
        return loss
