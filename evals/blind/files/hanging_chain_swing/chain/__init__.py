from .model import ChainModel, ChainState
from .checkpoint import CheckpointedRollout

__all__ = ["ChainModel", "ChainState", "CheckpointedRollout"]
