from .solver import PicSolver

__all__ = ["PicSolver"]
