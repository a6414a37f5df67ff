from .model import SEGMENTS, Rope

__all__ = ["SEGMENTS", "Rope"]
