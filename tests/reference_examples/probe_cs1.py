import cs1_state_aliasing as program  # the shipped program, imported as is
import warp as wp

SIM, TARGET = program.Sim(swap_states=True), program.target_positions()
K = wp.array([1.0], dtype=float, requires_grad=True)


def params():  # the live arrays the optimizer updates
    return {"k": K}


def loss():  # the full-horizon objective at the current values; rebuilds every state
    return float(SIM.loss(K, TARGET).numpy()[0])


def grad():  # the gradient the optimizer consumes, from the program's own tape
    K.grad.zero_()
    tape = wp.Tape()
    tape.backward(SIM.loss(K, TARGET, tape))
    return {"k": K.grad.numpy().copy()}
