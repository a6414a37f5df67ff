"""verification §7: a Warp parameter driven by a torch optimizer; whose .grad gets zeroed, and when."""

import json

import torch
import warp as wp

wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def square_sum(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


x = wp.array([1.0, 2.0], dtype=float, requires_grad=True)  # a persistent Warp array
x_torch = wp.to_torch(x)  # shares x's memory, and x.grad as x_torch.grad
shared_grad = x_torch.grad is not None and x_torch.grad.data_ptr() == x.grad.ptr
opt = torch.optim.SGD([x_torch], lr=0.0)
warp_grads = []
for _ in range(3):
    opt.zero_grad()  # sets x_torch.grad to None; x.grad keeps its values
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square_sum, dim=2, inputs=[x], outputs=[loss])
    tape.zero()  # a new tape before its first backward() knows no gradients: this zeroes nothing
    tape.backward(loss)
    warp_grads.append(x.grad.numpy().tolist())
print(
    json.dumps(
        {
            "shared_grad_at_start": shared_grad,
            "warp_grad_by_iteration": warp_grads,
            "torch_grad_after_zero_grad": None if x_torch.grad is None else x_torch.grad.tolist(),
        }
    )
)
