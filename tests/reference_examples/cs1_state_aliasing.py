"""case study 1: state objects swapped inside one tape (the loss plateaus; the learning rate gets blamed)."""

import json
import sys

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.config.verify_autograd_array_access = "--tracker" in sys.argv

N, STEPS, DT, DAMPING = 16, 40, 0.05, 0.4
K_TRUE = 2.5


@wp.kernel
def step(
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    k: wp.array(dtype=float),
    x_out: wp.array(dtype=float),
    v_out: wp.array(dtype=float),
):
    i = wp.tid()
    v_new = v[i] + DT * (-k[0] * x[i] - DAMPING * v[i])
    v_out[i] = v_new
    x_out[i] = x[i] + DT * v_new


@wp.kernel
def mse(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d / float(N))


class State:
    def __init__(self):
        self.x = wp.array(np.linspace(-1.0, 1.0, N), dtype=float, requires_grad=True)
        self.v = wp.zeros(N, dtype=float, requires_grad=True)


class Sim:
    def __init__(self, swap_states, steps=STEPS):
        self.swap_states, self.steps = swap_states, steps

    def rollout(self, k):
        state_in, state_out = State(), State()
        for _ in range(self.steps):
            wp.launch(step, dim=N, inputs=[state_in.x, state_in.v, k], outputs=[state_out.x, state_out.v])
            if self.swap_states:
                state_in, state_out = state_out, state_in  # BUG: step t+1 overwrites what step t read
            else:
                state_in, state_out = state_out, State()
        return state_in

    def loss(self, k, target, tape=None):
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        if tape is None:
            wp.launch(mse, dim=N, inputs=[self.rollout(k).x, target], outputs=[loss])
            return loss
        with tape:
            wp.launch(mse, dim=N, inputs=[self.rollout(k).x, target], outputs=[loss])
        return loss


def target_positions():
    return Sim(swap_states=False).rollout(wp.array([K_TRUE], dtype=float)).x


def ad_and_fd(sim, k_value, target, eps=1e-3):
    k = wp.array([k_value], dtype=float, requires_grad=True)
    tape = wp.Tape()
    tape.backward(sim.loss(k, target, tape))
    f = [float(sim.loss(wp.array([k_value + s], dtype=float), target).numpy()[0]) for s in (eps, -eps)]
    return float(k.grad.numpy()[0]), (f[0] - f[1]) / (2 * eps)


def train(sim, target, iterations=40, lr=3.0):
    k = wp.array([1.0], dtype=float, requires_grad=True)
    history = []
    for _ in range(iterations):
        tape = wp.Tape()
        loss = sim.loss(k, target, tape)
        tape.backward(loss)
        history.append(float(loss.numpy()[0]))
        k.assign(k.numpy() - lr * k.grad.numpy())
        tape.zero()  # the next iteration must not add onto this gradient
    return history, float(k.numpy()[0])


def main():
    target = target_positions()
    if (
        "--tracker" in sys.argv
    ):  # one taped rollout of each version with the tracker on; warnings go to stderr
        ad_and_fd(Sim(swap_states=True), 1.0, target)
        print("--- fixed ---", file=sys.stderr, flush=True)
        ad_and_fd(Sim(swap_states=False), 1.0, target)
        return
    report = {}
    for name, swap in (("buggy", True), ("fixed", False)):
        history, k_final = train(Sim(swap), target)
        ad, fd = ad_and_fd(Sim(swap), 1.0, target)
        report[name] = {
            "loss_first": history[0],
            "loss_best": min(history),
            "loss_last": history[-1],
            "k_final": k_final,
            "ad": ad,
            "fd": fd,
        }
    # What the user tried first: other learning rates. The buggy fit lands on the same wrong k every time.
    report["buggy_k_final_by_lr"] = {
        lr: train(Sim(swap_states=True), target, lr=lr)[1] for lr in (0.5, 1.5, 3.0)
    }
    # Horizon bisection: compare AD with FD on truncated rollouts to see where they part ways.
    report["ad_over_fd_by_horizon"] = {}
    for h in (1, 2, 3, 5, 10, 20, 40):
        ad, fd = ad_and_fd(Sim(swap_states=True, steps=h), 1.0, target, eps=1e-2)
        report["ad_over_fd_by_horizon"][h] = ad / fd
    print(json.dumps(report))


if __name__ == "__main__":
    main()
