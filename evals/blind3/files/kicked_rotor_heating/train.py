"""Shape the kick of a driven rotor ensemble so its energy after 60 kicks hits a target.

32 rotors start at slightly different angles; every period each gets a kick whose strength is
a short Fourier series in the rotor angle (the four coefficients are what we tune). With strong
kicks the rotors heat up chaotically, which is the regime the experiment runs in.
"""

import numpy as np
import warp as wp

N_ROTORS = 32
N_HARMONICS = 4
KICKS = 60
TARGET_ENERGY = 2.0


@wp.kernel
def kick(
    coeff: wp.array(dtype=float),
    theta_in: wp.array(dtype=float),
    p_in: wp.array(dtype=float),
    theta_out: wp.array(dtype=float),
    p_out: wp.array(dtype=float),
):
    i = wp.tid()
    th = theta_in[i]
    force = float(0.0)
    for k in range(4):
        force += coeff[k] * wp.sin(float(k + 1) * th)
    p = p_in[i] + force
    p_out[i] = p
    theta_out[i] = th + p


@wp.kernel
def mean_energy(p: wp.array(dtype=float), n: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 0.5 * p[i] * p[i] / n)


@wp.kernel
def square_gap(mean_e: wp.array(dtype=float), target: float, loss: wp.array(dtype=float)):
    d = mean_e[0] - target
    loss[0] = d * d


def initial_state():
    rng = np.random.default_rng(11)
    theta = rng.uniform(0.0, 2.0 * np.pi, N_ROTORS).astype(np.float32)
    p = np.zeros(N_ROTORS, dtype=np.float32)
    return theta, p


def rollout(coeff, kicks=KICKS):
    theta0, p0 = initial_state()
    th = [wp.array(theta0, dtype=float, requires_grad=True)]
    ps = [wp.array(p0, dtype=float, requires_grad=True)]
    for _ in range(kicks):
        th.append(wp.zeros(N_ROTORS, dtype=float, requires_grad=True))
        ps.append(wp.zeros(N_ROTORS, dtype=float, requires_grad=True))
        wp.launch(kick, N_ROTORS, inputs=[coeff, th[-2], ps[-2]], outputs=[th[-1], ps[-1]])
    mean_e = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(mean_energy, N_ROTORS, inputs=[ps[-1], float(N_ROTORS)], outputs=[mean_e])
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(square_gap, 1, inputs=[mean_e, TARGET_ENERGY], outputs=[loss])
    return loss, mean_e


def loss_and_grad(coeff, kicks=KICKS):
    tape = wp.Tape()
    with tape:
        loss, mean_e = rollout(coeff, kicks)
    tape.backward(loss)
    g = coeff.grad.numpy().copy()
    tape.zero()
    return float(loss.numpy()[0]), float(mean_e.numpy()[0]), g


def main():
    coeff = wp.array(np.array([1.4, 0.3, -0.2, 0.1], dtype=np.float32), dtype=float, requires_grad=True)
    step = 0.02  # the raw gradient is huge in the chaotic regime: take fixed-length steps
    for it in range(10):
        loss, e, g = loss_and_grad(coeff)
        norm = np.linalg.norm(g)
        print(f"iter {it}  mean energy {e:8.3f}  loss {loss:10.4f}  |grad| {norm:.3e}")
        coeff.assign(coeff.numpy() - step * g / max(norm, 1e-12))
    print("coefficients:", coeff.numpy())


if __name__ == "__main__":
    main()
