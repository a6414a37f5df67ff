import numpy as np


class GradientDescent:
    """Plain gradient descent on persistent Warp arrays, with a gradient-norm log."""

    def __init__(self, params, lr):
        self.params = params
        self.lr = lr
        self.last_norm = 0.0

    def gradients(self, tape, loss):
        grads = {name: p.grad.numpy().copy() for name, p in self.params.items()}
        for p in self.params.values():
            p.grad.zero_()
        tape.backward(loss)
        self.last_norm = float(np.sqrt(sum(np.sum(g * g) for g in grads.values())))
        return grads

    def apply(self, grads):
        for name, p in self.params.items():
            p.assign(p.numpy() - self.lr * grads[name])

    def step(self, tape, loss):
        self.apply(self.gradients(tape, loss))
