"""A sink's node: a batch's rows go to the sink at the batch end."""

from __future__ import annotations

from lowwater.graph.sinks import Sink
from lowwater.runtime.nodes.single_lane import _SingleLaneNode
from lowwater.runtime.records import Record

__all__ = ["SinkNode"]


class SinkNode(_SingleLaneNode):
    """Buffers a batch's rows and hands them to the sink at the batch end."""

    def __init__(self, node_id: int, name: str, sink: Sink) -> None:
        super().__init__(node_id, name)
        self.sink = sink
        self.records: list[Record] = []

    def on_start(self) -> None:
        self.sink.open()

    def on_record(self, record: Record, input_index: int) -> None:
        self.records.append(record)

    def on_batch_end(self, batch_id: int, end_of_input: bool) -> None:
        """The batch's rows to the sink; to a sink with ``write_records`` (the Spark engine's general
        path), the records themselves: their source positions, and a late element's windows."""
        self.combine_inputs(batch_id)
        records, self.records = self.records, []
        write_records = getattr(self.sink, "write_records", None)
        if write_records is not None:
            write_records(batch_id, records)
        else:
            self.sink.write_batch(batch_id, [r.value for r in records])
