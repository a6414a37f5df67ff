from .chain import Chain

__all__ = ["Chain"]
