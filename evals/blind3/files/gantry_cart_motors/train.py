"""Open-loop motor commands for 18 gantry carts, each on its own rail with a spring return.

The five carts on the heavy rail have a gearbox that scales the motor force; the rail's force
limit F_MAX is applied to the force that reaches the cart. The drive current (force / K_T) is
logged for the power budget.
"""

import numpy as np
import warp as wp

N_CARTS = 18
F_MAX = 6.0
K_T = 0.8  # N per A
GEARED = np.array([2, 5, 9, 13, 16], dtype=np.int32)
RATIOS = np.array([2.5, 1.8, 3.0, 2.2, 1.5], dtype=np.float32)


@wp.kernel
def motor_force(command: wp.array(dtype=float), gear: wp.array(dtype=float), force: wp.array(dtype=float)):
    i = wp.tid()
    force[i] = command[i] * gear[i]


@wp.kernel
def rail_limit(force: wp.array(dtype=float), f_max: float, limited: wp.array(dtype=float)):
    i = wp.tid()
    limited[i] = wp.clamp(force[i], -f_max, f_max)


@wp.kernel
def to_current(force: wp.array(dtype=float), k_t: float):
    i = wp.tid()
    force[i] = force[i] / k_t


@wp.kernel
def cart_step(
    x: wp.array(dtype=float),
    v: wp.array(dtype=float),
    force: wp.array(dtype=float),
    mass: wp.array(dtype=float),
    dt: float,
    x_out: wp.array(dtype=float),
    v_out: wp.array(dtype=float),
):
    i = wp.tid()
    a = (force[i] - 4.0 * x[i] - 1.5 * v[i]) / mass[i]
    vn = v[i] + dt * a
    v_out[i] = vn
    x_out[i] = x[i] + dt * vn


@wp.kernel
def placement_error(x: wp.array(dtype=float), goal: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - goal[i]
    wp.atomic_add(loss, 0, d * d)


class Gantry:
    def __init__(self, steps=100, dt=0.02):
        rng = np.random.default_rng(8)
        self.steps, self.dt = steps, dt
        self.mass = wp.array(rng.uniform(1.0, 3.0, N_CARTS).astype(np.float32), dtype=float)
        self.goal = wp.array(rng.uniform(0.3, 1.2, N_CARTS).astype(np.float32), dtype=float)
        gear = np.ones(N_CARTS, dtype=np.float32)
        gear[GEARED] = RATIOS
        self.gear = wp.array(gear, dtype=float)

    def run(self, command):
        force = wp.zeros(N_CARTS, dtype=float, requires_grad=True)
        wp.launch(motor_force, N_CARTS, inputs=[command, self.gear], outputs=[force])
        limited = wp.zeros_like(force)
        wp.launch(rail_limit, N_CARTS, inputs=[force, F_MAX], outputs=[limited])
        # the motor-side force becomes the drive current for the power log
        wp.launch(to_current, N_CARTS, inputs=[force, K_T])
        self.current = force
        x = wp.zeros(N_CARTS, dtype=float, requires_grad=True)
        v = wp.zeros(N_CARTS, dtype=float, requires_grad=True)
        for _ in range(self.steps):
            xn, vn = wp.empty_like(x), wp.empty_like(v)
            wp.launch(cart_step, N_CARTS, inputs=[x, v, limited, self.mass, self.dt], outputs=[xn, vn])
            x, v = xn, vn
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        wp.launch(placement_error, N_CARTS, inputs=[x, self.goal], outputs=[loss])
        return loss


def initial_command():
    c = np.full(N_CARTS, 1.0, dtype=np.float32)
    c[[0, 11]] = 7.5  # two carts start at the rail limit
    c[[3, 8, 14]] = [5.2, 5.5, 5.0]
    return wp.array(c, dtype=float, requires_grad=True)


def loss_and_grad(gantry, command):
    tape = wp.Tape()
    with tape:
        loss = gantry.run(command)
    tape.backward(loss)
    g = command.grad.numpy().copy()
    tape.zero()
    return float(loss.numpy()[0]), g


def main():
    gantry = Gantry()
    command = initial_command()
    for it in range(15):
        loss, g = loss_and_grad(gantry, command)
        amps = np.abs(gantry.current.numpy()).sum()
        print(f"iter {it:2d}  placement error {loss:.6f}  drive current {amps:.2f} A")
        command.assign(command.numpy() - 0.5 * g)
    print("commands:", np.round(command.numpy(), 3))


if __name__ == "__main__":
    main()
