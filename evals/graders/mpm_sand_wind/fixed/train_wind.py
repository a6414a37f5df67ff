"""Estimate the steady wind acting on a falling sand clump from its tracked centre of mass."""

import numpy as np
import warp as wp

from mpm import PicSolver

STEPS = 40


@wp.kernel
def centre_of_mass(x: wp.array(dtype=wp.vec2), t: int, com: wp.array(dtype=wp.vec2)):
    p = wp.tid()
    wp.atomic_add(com, t, x[p] / float(x.shape[0]))


@wp.kernel
def track_error(com: wp.array(dtype=wp.vec2), tracked: wp.array(dtype=wp.vec2), t: int, loss: wp.array(dtype=float)):
    d = com[t] - tracked[t]
    loss[t] = 1000.0 * wp.dot(d, d)


class WindFit:
    def __init__(self):
        self.solver = PicSolver(STEPS)
        self.wind = wp.zeros(1, dtype=wp.vec2, requires_grad=True)
        self.tracked = wp.zeros(STEPS + 1, dtype=wp.vec2)
        self.com = wp.zeros(STEPS + 1, dtype=wp.vec2, requires_grad=True)
        self.losses = wp.zeros(STEPS + 1, dtype=float, requires_grad=True)

    def observe(self, t):
        s = self.solver
        wp.launch(centre_of_mass, dim=s.num_particles, inputs=[s.x[t], t], outputs=[self.com])
        wp.launch(track_error, dim=1, inputs=[self.com, self.tracked, t], outputs=[self.losses])

    def objective(self):
        self.com.zero_()
        self.losses.zero_()
        for t in range(STEPS):
            self.solver.step(t, self.wind)
            self.observe(t + 1)
        return float(self.losses.numpy().sum())

    def gradient(self):
        self.com.zero_()
        self.losses.zero_()
        tape = wp.Tape()
        with tape:
            for t in range(STEPS):
                self.solver.step(t, self.wind)
                self.observe(t + 1)
        tape.backward(grads={self.losses: wp.ones(STEPS + 1, dtype=float)})
        grad = self.wind.grad.numpy()[0].copy()
        tape.zero()
        return grad

    def record_track(self, true_wind=(0.8, 0.5)):
        self.wind.assign(np.array([true_wind], dtype=np.float32))
        for t in range(STEPS):
            self.solver.step(t, self.wind)
        com = np.stack([x.numpy().mean(axis=0) for x in self.solver.x])
        self.tracked.assign(com.astype(np.float32))
        self.wind.zero_()


def main():
    wp.init()
    fit = WindFit()
    fit.record_track()
    lr = 0.01
    for it in range(25):
        g = fit.gradient()
        fit.wind.assign((fit.wind.numpy() - lr * g).astype(np.float32))
        print(f"iter {it:2d}  track error {fit.objective():.6f}  wind {fit.wind.numpy()[0]}")


if __name__ == "__main__":
    main()
