"""A side output of a window or process operator."""

from __future__ import annotations

from lowwater.runtime.nodes.node import Node

__all__ = ["SideOutputNode"]


class SideOutputNode(Node):
    """One side output of a window operator; carries the operator's watermark."""
