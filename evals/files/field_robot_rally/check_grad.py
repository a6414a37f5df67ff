"""Gradient check of the rally objective with Warp's own gradcheck."""

import warp as wp
import warp.autograd

import rally


def forward(cmd):
    return rally.FLEET.spread(cmd)


ok = warp.autograd.gradcheck(forward, inputs=[rally.COMMAND], outputs=[rally.FLEET.loss], raise_exception=False)
print("gradcheck passed" if ok else "gradcheck FAILED")
