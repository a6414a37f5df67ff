from .sim import STONES, HailSim

__all__ = ["STONES", "HailSim"]
