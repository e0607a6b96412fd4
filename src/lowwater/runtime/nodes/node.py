"""The base of every reference-runtime operator: records pushed, lane events forwarded."""

from __future__ import annotations

from typing import Any

from lowwater.core.errors import not_an_output_tag
from lowwater.graph.transformations import OutputTag
from lowwater.runtime.nodes.dead_letters import DeadLetters
from lowwater.runtime.records import Lane, LaneEvent, Record

__all__ = ["Node"]


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _stateless_label(kind: str, name: str, fn: Any) -> str:
    """A map, filter or flat_map as its failure names it: ``map parse``, or with a name of the
    user's own (``map(fn, "amounts")``, ``.name("amounts")``) ``map 'amounts' (parse)``."""
    return f"{kind} {_fn_name(fn)}" if name == kind else f"{kind} {name!r} ({_fn_name(fn)})"


class Node:
    """An operator instance. Subclasses override what they need."""

    def __init__(self, node_id: int, name: str) -> None:
        self.node_id = node_id
        self.name = name
        self.outputs: list[tuple[Node, int]] = []
        self.side_outputs: dict[OutputTag, list[tuple[Node, int]]] = {}
        self.dead = DeadLetters()
        """Shared by every node of a job (the compiler sets it)."""

    # records
    def on_record(self, record: Record, input_index: int) -> None:
        self.emit(record)

    def emit(self, record: Record) -> None:
        for node, idx in self.outputs:
            node.on_record(record, idx)

    def emit_side(self, tag: OutputTag, record: Record) -> None:
        if not isinstance(tag, OutputTag):  # a name alone reached no side output, without a word
            raise TypeError(not_an_output_tag(tag))
        for node, idx in self.side_outputs.get(tag, ()):
            node.on_record(record, idx)

    # watermarks
    def on_lane_event(self, input_index: int, lane: Lane, event: LaneEvent) -> None:
        self.emit_lane_event(lane, event)

    def emit_lane_event(self, lane: Lane, event: LaneEvent) -> None:
        for node, idx in self.outputs:
            node.on_lane_event(idx, lane, event)
        for consumers in self.side_outputs.values():
            for node, idx in consumers:
                node.on_lane_event(idx, lane, event)

    def on_start(self) -> None:
        """Announce lanes downstream."""

    def on_batch_end(self, batch_id: int, end_of_input: bool) -> None:
        """Emit watermarks (in topological order, after every upstream node)."""

    def metrics(self) -> dict[str, Any]:
        return {}

    STATE: tuple[str, ...] = ()
    """The attributes that are data (restored after a restart); everything else is code or wiring."""

    def restore(self, old: Node) -> None:
        """Take ``old``'s state (from a checkpoint) into this node, built from the current code."""
        for name in self.STATE:
            setattr(self, name, getattr(old, name, getattr(self, name)))
