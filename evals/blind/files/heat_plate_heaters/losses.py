import warp as wp


@wp.kernel
def sensor_sq_err(
    T: wp.array2d(dtype=float),
    sensors: wp.array(dtype=wp.int32, ndim=2),
    readings: wp.array(dtype=float),
    loss: wp.array(dtype=float),
):
    s = wp.tid()
    r = T[sensors[s, 0], sensors[s, 1]] - readings[s]
    wp.atomic_add(loss, 0, r * r)


def sensor_loss(T, sensors, readings):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(sensor_sq_err, sensors.shape[0], inputs=[T, sensors, readings], outputs=[loss])
    return loss
