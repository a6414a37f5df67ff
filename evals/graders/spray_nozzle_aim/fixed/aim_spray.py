"""Aim a spray nozzle (speed, pitch, yaw) so that the droplets that land on the plate cluster at its centre."""

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING

NUM_DROPLETS = 64
NUM_STEPS = 30
DT = 0.02
DRAG = 0.3
PLATE_CENTER = wp.vec3(2.0, 0.0, 0.0)
PLATE_RADIUS = 0.9


@wp.kernel
def emit(nozzle: wp.array(dtype=float), jitter: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    speed = nozzle[0]
    pitch = nozzle[1]
    yaw = nozzle[2]
    d = wp.vec3(wp.cos(pitch) * wp.cos(yaw), wp.sin(pitch), wp.cos(pitch) * wp.sin(yaw))
    v[i] = speed * d + jitter[i]


@wp.kernel
def fly(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    drag: float,
    dt: float,
    x_new: wp.array(dtype=wp.vec3),
    v_new: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    vel = v[i] + dt * (wp.vec3(0.0, -9.81, 0.0) - drag * vel_mag(v[i]) * v[i])
    v_new[i] = vel
    x_new[i] = x[i] + dt * vel


@wp.func
def vel_mag(v: wp.vec3):
    return wp.length(v)


@wp.func
def reserve_slot(count: wp.array(dtype=int), slots: wp.array(dtype=int), tid: int):
    s = wp.atomic_add(count, 0, 1)
    slots[tid] = s
    return s


@wp.func_replay(reserve_slot)
def replay_reserve_slot(count: wp.array(dtype=int), slots: wp.array(dtype=int), tid: int):
    # the backward replay must reuse the slot the forward pass got, not draw a new one
    return slots[tid]


@wp.kernel
def collect_hits(
    x: wp.array(dtype=wp.vec3),
    center: wp.vec3,
    radius: float,
    count: wp.array(dtype=int),
    slots: wp.array(dtype=int),
    hits: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    p = x[i]
    dx = p[0] - center[0]
    dz = p[2] - center[2]
    if dx * dx + dz * dz < radius * radius:
        slot = reserve_slot(count, slots, i)
        if slot < hits.shape[0]:
            hits[slot] = p


@wp.kernel
def spread(hits: wp.array(dtype=wp.vec3), count: wp.array(dtype=int), center: wp.vec3, loss: wp.array(dtype=float)):
    i = wp.tid()
    if i < count[0]:
        d = hits[i] - center
        d = wp.vec3(d[0], 0.0, d[2])
        wp.atomic_add(loss, 0, wp.dot(d, d) / float(count[0]))


class Spray:
    def __init__(self, seed: int = 11):
        rng = np.random.default_rng(seed)
        self.jitter = wp.array(rng.normal(0.0, 0.25, (NUM_DROPLETS, 3)).astype(np.float32), dtype=wp.vec3)
        self.x = [wp.zeros(NUM_DROPLETS, dtype=wp.vec3, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.v = [wp.zeros(NUM_DROPLETS, dtype=wp.vec3, requires_grad=True) for _ in range(NUM_STEPS + 1)]
        self.count = wp.zeros(1, dtype=int)
        self.slots = wp.zeros(NUM_DROPLETS, dtype=int)
        self.hits = wp.zeros(NUM_DROPLETS, dtype=wp.vec3, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def run(self, nozzle: wp.array) -> wp.array:
        wp.launch(emit, dim=NUM_DROPLETS, inputs=[nozzle, self.jitter], outputs=[self.v[0]])
        for t in range(NUM_STEPS):
            wp.launch(fly, dim=NUM_DROPLETS, inputs=[self.x[t], self.v[t], DRAG, DT], outputs=[self.x[t + 1], self.v[t + 1]])
        self.count.zero_()
        self.hits.zero_()
        self.loss.zero_()
        wp.launch(collect_hits, dim=NUM_DROPLETS, inputs=[self.x[-1], PLATE_CENTER, PLATE_RADIUS, self.count, self.slots], outputs=[self.hits])
        wp.launch(spread, dim=NUM_DROPLETS, inputs=[self.hits, self.count, PLATE_CENTER], outputs=[self.loss])
        return self.loss


SPRAY = Spray()
NOZZLE = wp.array(np.array([4.2, 0.35, 0.08], np.float32), dtype=float, requires_grad=True)


def spray_loss(nozzle=NOZZLE) -> float:
    return float(SPRAY.run(nozzle).numpy()[0])


def spray_grad(nozzle=NOZZLE) -> wp.Tape:
    tape = wp.Tape()
    with tape:
        loss = SPRAY.run(nozzle)
    tape.backward(loss)
    return tape


if __name__ == "__main__":
    lr = np.array([0.5, 0.05, 0.05], np.float32)
    for it in range(30):
        tape = spray_grad(NOZZLE)
        loss = float(SPRAY.loss.numpy()[0])
        hits = int(SPRAY.count.numpy()[0])
        NOZZLE.assign(NOZZLE.numpy() - lr * NOZZLE.grad.numpy())
        tape.zero()
        if it % 3 == 0:
            print(f"iter {it:3d}  spread {loss:.5f}  droplets on plate {hits}")
    print("nozzle (speed, pitch, yaw):", np.round(NOZZLE.numpy(), 4))
