"""A two-input operator (connect + map or flat_map)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lowwater.runtime.nodes.node import _fn_name
from lowwater.runtime.nodes.single_lane import _SingleLaneNode
from lowwater.runtime.records import Record
from lowwater.runtime.user_code import user_code_failed

__all__ = ["CoNode"]


class CoNode(_SingleLaneNode):
    """Two inputs, one function each; the watermark is the minimum of the inputs."""

    def __init__(
        self, node_id: int, name: str, fn1: Callable[[Any], Any], fn2: Callable[[Any], Any], flat: bool
    ) -> None:
        super().__init__(node_id, name, inputs=2)
        self.fns = (fn1, fn2)
        self.flat = flat

    def on_record(self, record: Record, input_index: int) -> None:
        fn = self.fns[input_index]
        try:
            out = list(fn(record.value) or ()) if self.flat else [fn(record.value)]
        except (Exception, SystemExit) as e:
            user_code_failed(e, f"{self.name} {_fn_name(fn)}", record, on_bad=self.dead.add)
            return
        for v in out:
            self.emit(Record(v, record.timestamp, self.out_lane))

    def on_batch_end(self, batch_id: int, end_of_input: bool) -> None:
        self.forward_status(*self.combine_inputs(batch_id))
