"""map, filter and flat_map."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lowwater.runtime.nodes.node import Node, _stateless_label
from lowwater.runtime.records import Record
from lowwater.runtime.user_code import user_code_failed

__all__ = ["StatelessNode"]


class StatelessNode(Node):
    """map, filter or flat_map, lane by lane."""

    def __init__(self, node_id: int, name: str, kind: str, fn: Callable[[Any], Any]) -> None:
        super().__init__(node_id, name)
        self.kind = kind
        self.fn = fn

    def on_record(self, record: Record, input_index: int) -> None:
        try:
            if self.kind == "map":
                out = [self.fn(record.value)]
            elif self.kind == "filter":
                out = [record.value] if self.fn(record.value) else []
            else:
                out = list(self.fn(record.value) or ())
        except (Exception, SystemExit) as e:
            user_code_failed(e, _stateless_label(self.kind, self.name, self.fn), record, on_bad=self.dead.add)
            return
        for v in out:
            self.emit(Record(v, record.timestamp, record.lane, record.partition, record.offset, record.source))
