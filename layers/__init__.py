"""Layers: functions that own parameters and add ops to the global tape, and data feeders."""
from .feed import Fill
from .layer import Layer
from .linear import Linear
from .mean import Mean

__all__ = ["Fill", "Layer", "Linear", "Mean"]
