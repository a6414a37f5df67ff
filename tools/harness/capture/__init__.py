"""Capture: a user's own training script read as iterations, parameters, objective and FD perturbation points.

What other modules import from here: `CaptureListener` (modes "capture" and "fd"), `RunListener` (mode
"run"), and the frame helpers `name_of`, `frame_value`, `scalar_of` other listeners share (`capture_values`).
"""

from ..capture_values import frame_value, name_of, scalar_of
from .listener import CaptureListener
from .run import RunListener

__all__ = ["CaptureListener", "RunListener", "frame_value", "name_of", "scalar_of"]
