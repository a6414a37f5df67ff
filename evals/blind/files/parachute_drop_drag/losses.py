import warp as wp


@wp.kernel
def altitude_misfit(z: wp.array(dtype=float), z_obs: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    e = z[i] - z_obs[i]
    wp.atomic_add(loss, 0, e * e)


@wp.kernel
def cd_prior(cd: wp.array(dtype=float), cd_ref: float, w: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    e = cd[i] - cd_ref
    wp.atomic_add(loss, 0, w * e * e)


def total_loss(z, z_obs, cd):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    wp.launch(altitude_misfit, z.shape[0], inputs=[z, z_obs], outputs=[loss])
    wp.launch(cd_prior, cd.shape[0], inputs=[cd, 1.2, 5.0], outputs=[loss])
    return loss
