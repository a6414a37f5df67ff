import numpy as np


class Momentum:
    """Heavy-ball gradient descent on persistent Warp arrays."""

    def __init__(self, params, lr, beta=0.6):
        self.params = params
        self.lr = lr
        self.beta = beta
        self.velocity = {k: np.zeros(p.shape, dtype=np.float32) for k, p in params.items()}

    def read_grads(self, tape):
        grads = {k: p.grad.numpy().copy() for k, p in self.params.items()}
        tape.zero()
        return grads

    def apply(self, grads):
        for k, p in self.params.items():
            self.velocity[k] = self.beta * self.velocity[k] + grads[k]
            p.assign(np.maximum(p.numpy() - self.lr * self.velocity[k], 0.0))
