"""A sink's node: a batch's rows go to the sink at the batch end."""

from __future__ import annotations

from typing import Any

from lowwater.graph.sinks import Sink
from lowwater.runtime.nodes.single_lane import _SingleLaneNode
from lowwater.runtime.records import Record

__all__ = ["SinkNode"]


class SinkNode(_SingleLaneNode):
    """Buffers a batch's rows and hands them to the sink at the batch end."""

    def __init__(self, node_id: int, name: str, sink: Sink) -> None:
        super().__init__(node_id, name)
        self.sink = sink
        self.rows: list[Any] = []

    def on_start(self) -> None:
        self.sink.open()

    def on_record(self, record: Record, input_index: int) -> None:
        self.rows.append(record.value)

    def on_batch_end(self, batch_id: int, end_of_input: bool) -> None:
        self.combine_inputs(batch_id)
        rows, self.rows = self.rows, []
        self.sink.write_batch(batch_id, rows)
