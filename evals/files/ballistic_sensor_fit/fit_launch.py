"""Calibrate launch velocities so each projectile reaches its sensor position at t = 1 s."""

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

NUM_SHOTS = 16
NUM_STEPS = 60
DT = 1.0 / 60.0
DRAG = 0.05
GRAVITY = wp.constant(wp.vec3(0.0, -9.81, 0.0))


@wp.kernel
def integrate(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    drag: float,
    dt: float,
    x_new: wp.array(dtype=wp.vec3),
    v_new: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    vel = v[i]
    acc = GRAVITY - drag * wp.length(vel) * vel
    vel_next = vel + dt * acc
    v_new[i] = vel_next
    x_new[i] = x[i] + dt * vel_next


@wp.kernel
def observe(x: wp.array(dtype=wp.vec3), offset: wp.vec3, obs: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    obs[i] = x[i] - offset


@wp.kernel
def squared_error(obs: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), scale: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    d = obs[i] - target[i]
    wp.atomic_add(loss, 0, scale * wp.dot(d, d))


SENSOR_ORIGIN = wp.vec3(0.0, 1.5, 0.0)


class Rollout:
    def __init__(self, num_shots: int = NUM_SHOTS, num_steps: int = NUM_STEPS):
        self.n = num_shots
        self.steps = num_steps
        self.x = [wp.zeros(num_shots, dtype=wp.vec3, requires_grad=True) for _ in range(num_steps + 1)]
        self.v = [wp.zeros(num_shots, dtype=wp.vec3, requires_grad=True) for _ in range(num_steps + 1)]
        # keep the sensor adjoints around for the debugging plots
        self.obs = wp.zeros(num_shots, dtype=wp.vec3, requires_grad=True, retain_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def run(self, v0: wp.array):
        wp.copy(self.v[0], v0)
        for t in range(self.steps):
            wp.launch(
                integrate,
                dim=self.n,
                inputs=[self.x[t], self.v[t], DRAG, DT],
                outputs=[self.x[t + 1], self.v[t + 1]],
            )
        wp.launch(observe, dim=self.n, inputs=[self.x[-1], SENSOR_ORIGIN], outputs=[self.obs])
        return self.obs

    def sensor_loss(self, target: wp.array):
        self.loss.zero_()
        wp.launch(observe, dim=self.n, inputs=[self.x[-1], SENSOR_ORIGIN], outputs=[self.obs])
        wp.launch(squared_error, dim=self.n, inputs=[self.obs, target, 1.0 / self.n], outputs=[self.loss])
        return self.loss


def make_problem(seed: int = 7):
    rng = np.random.default_rng(seed)
    v_true = np.stack(
        [rng.uniform(4.0, 8.0, NUM_SHOTS), rng.uniform(5.0, 9.0, NUM_SHOTS), rng.uniform(-2.0, 2.0, NUM_SHOTS)], axis=1
    ).astype(np.float32)
    sim = Rollout()
    sim.run(wp.array(v_true, dtype=wp.vec3))
    target = wp.clone(sim.obs, requires_grad=False)
    v0 = wp.array(np.tile(np.array([5.0, 6.0, 0.0], dtype=np.float32), (NUM_SHOTS, 1)), dtype=wp.vec3, requires_grad=True)
    return v0, target


V0, TARGET = make_problem()
SIM = Rollout()


def evaluate(v0: wp.array = V0) -> float:
    SIM.run(v0)
    return float(SIM.sensor_loss(TARGET).numpy()[0])


def loss_and_grad(v0: wp.array = V0, tape: wp.Tape | None = None):
    tape = tape or wp.Tape()
    with tape:
        SIM.run(v0)
        loss = SIM.sensor_loss(TARGET)
    tape.backward(loss)
    return float(loss.numpy()[0]), tape


@wp.kernel
def sgd_step(p: wp.array(dtype=wp.vec3), g: wp.array(dtype=wp.vec3), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * g[i]


if __name__ == "__main__":
    lr = 12.0
    tape = wp.Tape()
    for it in range(25):
        loss, tape = loss_and_grad(V0, tape)
        wp.launch(sgd_step, dim=NUM_SHOTS, inputs=[V0, V0.grad, lr])
        tape.zero()
        tape.reset()
        if it % 2 == 0 or it == 24:
            print(f"iter {it:3d}  loss {loss:.6e}")
    print(f"final loss {evaluate():.6e}")
