from .pucks import PuckRink

__all__ = ["PuckRink"]
