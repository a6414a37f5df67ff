"""warpgrad: trustworthy gradients for NVIDIA Warp programs."""

__version__ = "0.1.0"
