"""Tune the altitude PD gains of eight drones of different mass with torch.optim.SGD; the objective
is the fleet's mean tracking error over a 2 s climb to hover."""

import torch

from hover_sim import N, HoverRollout, drone_masses


def fleet_error(gains, mass):
    return HoverRollout.apply(gains, mass).mean()


def initial_gains():
    return torch.tensor([[8.0, 3.0]] * N, dtype=torch.float32)


def main(iters=20, lr=2.0):
    mass = drone_masses()
    gains = initial_gains().requires_grad_(True)
    opt = torch.optim.SGD([gains], lr=lr)
    for it in range(iters):
        opt.zero_grad()
        loss = fleet_error(gains, mass)
        loss.backward()
        opt.step()
        print(f"iter {it:2d}  fleet tracking error {loss.item():.5f}")
    print("gains (kp, kd):", gains.detach().numpy().round(2).tolist())


if __name__ == "__main__":
    main()
