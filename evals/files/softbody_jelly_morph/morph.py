"""Find spring activations that morph a jelly cube into a scanned target shape."""

import numpy as np
import warp as wp

from jelly import JellyModel, SpringSolver


@wp.kernel
def shape_error(x: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, 100.0 * wp.dot(d, d))


class Morph:
    def __init__(self, steps=50):
        self.model = JellyModel()
        self.solver = SpringSolver(self.model)
        self.steps = steps
        self.activation = wp.zeros(self.model.num_springs, dtype=float, requires_grad=True)
        self.state0 = self.model.state()
        self.state0.x.assign(self.model.rest_positions)
        self.target = wp.zeros(self.model.num_particles, dtype=wp.vec3)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def rollout(self):
        state_in = self.state0
        state_out = self.model.state()
        for t in range(self.steps):
            self.solver.step(state_in, state_out, self.activation, t)
            state_in = state_out
        return state_in

    def forward(self):
        self.loss.zero_()
        final = self.rollout()
        wp.launch(shape_error, dim=self.model.num_particles, inputs=[final.x, self.target], outputs=[self.loss])
        return self.loss

    def scan_target(self, seed=5):
        rng = np.random.default_rng(seed)
        self.activation.assign(rng.uniform(-0.3, 0.3, self.model.num_springs).astype(np.float32))
        self.target.assign(self.rollout().x.numpy())
        self.activation.zero_()


def main():
    wp.init()
    morph = Morph()
    morph.scan_target()
    lr = 0.2
    for it in range(40):
        tape = wp.Tape()
        with tape:
            morph.forward()
        tape.backward(morph.loss)
        morph.activation.assign(morph.activation.numpy() - lr * morph.activation.grad.numpy())
        tape.zero()
        print(f"step {it:3d}  shape error {morph.loss.numpy()[0]:.6f}")


if __name__ == "__main__":
    main()
