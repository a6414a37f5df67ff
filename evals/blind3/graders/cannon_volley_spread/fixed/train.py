"""Aim the salute: find muzzle velocities that put every shell at its burst point at t = 2 s."""

import warp as wp

from volley import SHELLS, Volley


@wp.kernel
def descend(v: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    v[i] = v[i] - lr * g[i]


class Trainer:
    def __init__(self, lr=0.01):
        self.volley = Volley()
        self.lr = lr
        self.tape = wp.Tape()
        with wp.ScopedCapture(device="cpu") as cap:
            with self.tape:
                self.volley.simulate()
            self.tape.backward(self.volley.loss)
        self.graph = cap.graph

    def step(self):
        wp.capture_launch(self.graph)
        v0 = self.volley.muzzle_velocity
        wp.launch(descend, SHELLS, inputs=[v0, v0.grad, self.lr])
        self.tape.zero()
        return float(self.volley.loss.numpy()[0])


def main():
    trainer = Trainer()
    for it in range(16):
        print(f"iter {it:2d}  burst miss {trainer.step():.4f} m^2")


if __name__ == "__main__":
    main()
