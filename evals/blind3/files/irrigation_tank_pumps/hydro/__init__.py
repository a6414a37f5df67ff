from .network import TankChain

__all__ = ["TankChain"]
