"""Six marker buoys on elastic mooring lines in a tidal current (3-D, explicit integration)."""

import numpy as np
import warp as wp

BUOYS = 6
STEPS = 150
DT = 0.01
K_LINE = 40.0
LIFT = 6.0


@wp.kernel
def buoy_step(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), anchor: wp.array(dtype=wp.vec3),
              length: wp.array(dtype=float), current: wp.vec3, dt: float,
              x_out: wp.array(dtype=wp.vec3), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    d = x[i] - anchor[i]
    r = wp.length(d)
    tension = K_LINE * (r - length[i]) * d / r
    rel = current - v[i]
    drag = 0.8 * wp.length(rel) * rel
    a = wp.vec3(0.0, 0.0, LIFT) - tension + drag - 0.5 * v[i]
    vn = v[i] + dt * a
    v_out[i] = vn
    x_out[i] = x[i] + dt * vn


@wp.kernel
def station_error(x: wp.array(dtype=wp.vec3), station: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    e = x[i] - station[i]
    wp.atomic_add(loss, 0, wp.dot(e, e))


class Mooring:
    def __init__(self):
        xs = np.arange(BUOYS) * 4.0
        self.anchor = wp.array(np.stack([xs, np.zeros(BUOYS), np.zeros(BUOYS)], 1), dtype=wp.vec3)
        self.x0 = wp.array(np.stack([xs, np.zeros(BUOYS), np.full(BUOYS, 3.0)], 1), dtype=wp.vec3)
        self.station = wp.array(np.stack([xs + 0.6, np.zeros(BUOYS), np.linspace(3.4, 4.4, BUOYS)], 1),
                                dtype=wp.vec3)
        self.current = wp.vec3(0.5, 0.0, 0.0)

    def drift(self, length):
        """Squared distance of the buoys from their stations after STEPS steps."""
        x = self.x0
        v = wp.zeros(BUOYS, dtype=wp.vec3)
        for _ in range(STEPS):
            x_next = wp.empty(BUOYS, dtype=wp.vec3, requires_grad=True)
            v_next = wp.empty(BUOYS, dtype=wp.vec3, requires_grad=True)
            wp.launch(buoy_step, dim=BUOYS, inputs=[x, v, self.anchor, length, self.current, DT],
                      outputs=[x_next, v_next])
            x, v = x_next, v_next
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(station_error, dim=BUOYS, inputs=[x, self.station], outputs=[loss])
        return loss
