"""union: the lanes of every input go on."""

from __future__ import annotations

from lowwater.runtime.nodes.node import Node

__all__ = ["UnionNode"]


class UnionNode(Node):
    """Forwards the records and lanes of every input; consumers take the minimum."""
