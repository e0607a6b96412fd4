"""Watermarks you can look at: per-batch metrics and pictures."""

from lowwater.observe.plot import plot_watermarks

__all__ = ["plot_watermarks"]
