"""tuner: a live tuning bench for MoE engines that stream experts into a small cache."""

from tuner.openmp import keep_threads_warm

keep_threads_warm()  # before torch loads libgomp (openmp.py)

__version__ = "0.1.0"
