from .model import JellyModel, State
from .solver import SpringSolver

__all__ = ["JellyModel", "SpringSolver", "State"]
