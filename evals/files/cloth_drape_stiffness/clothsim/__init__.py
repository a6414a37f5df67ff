from .mesh import grid_cloth
from .sim import ClothSim

__all__ = ["ClothSim", "grid_cloth"]
