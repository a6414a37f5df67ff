from .blades import RotorModel

__all__ = ["RotorModel"]
