"""tuner: a live tuning bench for MoE engines that stream experts into a small cache."""

__version__ = "0.1.0"
