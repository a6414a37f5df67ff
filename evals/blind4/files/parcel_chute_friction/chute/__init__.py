from .checkpoint import checkpointed_grad
from .physics import SECTIONS, Chute

__all__ = ["SECTIONS", "Chute", "checkpointed_grad"]
