"""A minimal differentiable drone-swarm model: thrust in, positions out."""
