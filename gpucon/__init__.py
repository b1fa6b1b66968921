"""gpucon: an operator console for GPU inference fleets."""

__version__ = "0.1.0"
