"""A source's node: one lane per source partition."""

from __future__ import annotations

from lowwater.core.errors import BadRecordError
from lowwater.core.time import MAX_TIMESTAMP
from lowwater.graph.sources import Source, SourceBatch, SourceIdle, SourceItem, SourceRecord, SourceWatermark
from lowwater.runtime.nodes.node import Node
from lowwater.runtime.records import Lane, LaneEvent, Record

__all__ = ["SourceNode"]


class SourceNode(Node):
    def __init__(self, node_id: int, name: str, source: Source, index: int = 0) -> None:
        super().__init__(node_id, name)
        self.source = source
        self.index = index
        """The source's position among the job's sources: lanes are ``(index, partition)``,
        the same in every process, so restored state finds its lanes."""
        self.source_name: str | None = None
        """Set by the job when it has several sources: each record's :attr:`Record.source`."""
        self.STATE = ("known", "_pending", "rows_in")
        self.known: set[int] = set()
        self._pending: list[tuple[int, LaneEvent]] = []
        self.rows_in = 0
        self.rows_in_batch = 0

    def lane(self, partition: int) -> Lane:
        return (self.index, partition)

    def on_start(self) -> None:
        for p in self.source.partitions():
            self._register(p)

    def _register(self, p: int) -> None:
        self.known.add(p)
        self.emit_lane_event(self.lane(p), LaneEvent("register"))

    def end(self) -> None:
        """This source is exhausted while others go on: like Flink, it sends MAX on every lane."""
        for p in sorted(self.known):
            self._pending.append((p, LaneEvent("watermark", MAX_TIMESTAMP)))

    def feed(self, batch: SourceBatch) -> None:
        self.begin_batch()
        for item in batch.items:
            self.feed_item(item)

    def begin_batch(self) -> None:
        self.rows_in_batch = 0

    def feed_item(self, item: SourceItem) -> None:
        """One item of the current batch (records are pushed downstream at once)."""
        if item.partition not in self.known:
            self._register(item.partition)
        if isinstance(item, SourceRecord):
            self.rows_in_batch += 1
            self.rows_in += 1
            record = Record(item.value, item.timestamp, self.lane(item.partition), item.partition, item.offset,
                            self.source_name)
            if item.error is not None:  # stored, but not an element
                self.dead.add(record, BadRecordError(BadRecordError.unparsed(item.error)))  # as Spark words it
                return
            self.emit(record)
        elif isinstance(item, SourceWatermark):
            self._pending.append((item.partition, LaneEvent("watermark", item.timestamp)))
        elif isinstance(item, SourceIdle):
            self._pending.append((item.partition, LaneEvent("idle")))

    def on_batch_end(self, batch_id: int, end_of_input: bool) -> None:
        pending, self._pending = self._pending, []
        for p, ev in pending:
            self.emit_lane_event(self.lane(p), ev)
        if end_of_input:
            for p in sorted(self.known):
                self.emit_lane_event(self.lane(p), LaneEvent("watermark", MAX_TIMESTAMP))
