"""A 5 x 5 trampoline net: border pinned, 40 springs, a heavy weight on the centre node."""

import numpy as np
import warp as wp

SIDE = 5
NODES = SIDE * SIDE
STEPS = 150
DT = 0.004
SPACING = 0.5


@wp.kernel
def spring_forces(x: wp.array(dtype=wp.vec3), springs: wp.array(dtype=wp.vec2i), k: wp.array(dtype=float),
                  rest: float, f: wp.array(dtype=wp.vec3)):
    s = wp.tid()
    a = springs[s][0]
    b = springs[s][1]
    d = x[b] - x[a]
    length = wp.length(d)
    fs = k[s] * (length - rest) * d / length
    wp.atomic_add(f, a, fs)
    wp.atomic_sub(f, b, fs)


@wp.kernel
def integrate(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), f: wp.array(dtype=wp.vec3),
              inv_mass: wp.array(dtype=float), dt: float):
    i = wp.tid()
    if inv_mass[i] > 0.0:
        a = f[i] * inv_mass[i] + wp.vec3(0.0, 0.0, -9.81) - 3.0 * v[i]
        v_new = v[i] + dt * a
        v[i] += dt * a
        x[i] += dt * v_new


@wp.kernel
def sag_error(x: wp.array(dtype=wp.vec3), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    e = x[i][2] - target[i]
    wp.atomic_add(loss, 0, e * e)


class Net:
    def __init__(self):
        ij = np.array([(i, j) for i in range(SIDE) for j in range(SIDE)])
        pos = np.concatenate([ij * SPACING, np.zeros((NODES, 1))], 1)
        self.x0 = pos.astype(np.float32)
        border = (ij == 0).any(1) | (ij == SIDE - 1).any(1)
        inv_mass = np.where(border, 0.0, 1.0 / 0.2)
        inv_mass[NODES // 2] = 1.0 / 3.0
        self.inv_mass = wp.array(inv_mass, dtype=float)
        pairs = [(i * SIDE + j, i * SIDE + j + 1) for i in range(SIDE) for j in range(SIDE - 1)]
        pairs += [(i * SIDE + j, (i + 1) * SIDE + j) for i in range(SIDE - 1) for j in range(SIDE)]
        self.springs = wp.array(np.array(pairs), dtype=wp.vec2i)
        self.n_springs = len(pairs)
        r = np.linalg.norm(pos[:, :2] - pos[NODES // 2, :2], axis=1)
        self.target = wp.array(-0.25 * np.cos(np.pi * np.minimum(r, 1.4) / 2.8) * ~border, dtype=float)
        self.rest = 0.9 * SPACING

    def sag(self, k):
        """Squared distance of the loaded net from the target sag after STEPS steps."""
        x = wp.array(self.x0, dtype=wp.vec3, requires_grad=True)
        v = wp.zeros(NODES, dtype=wp.vec3, requires_grad=True)
        for _ in range(STEPS):
            f = wp.zeros(NODES, dtype=wp.vec3, requires_grad=True)
            wp.launch(spring_forces, dim=self.n_springs, inputs=[x, self.springs, k, self.rest], outputs=[f])
            wp.launch(integrate, dim=NODES, inputs=[x, v, f, self.inv_mass, DT])
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(sag_error, dim=NODES, inputs=[x, self.target], outputs=[loss])
        return loss
