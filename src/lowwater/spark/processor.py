"""What the batch driver (:mod:`lowwater.spark.engine`) runs: one processor per path.

A processor runs one micro-batch against the state after the previous one and returns the
batch's output. Two kinds, by how their state is checkpointed:

* :class:`JsonStateProcessor` (the native and keyed paths): the control plane is JSON data,
  and the processor runs with the Spark session;
* :class:`PickledStateProcessor` (the general path): the state is the pickled
  :class:`~lowwater.runtime.job.CompiledJob`, a snapshot plus deltas, rebound to the current
  code after a restart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from lowwater.spark.outputs import Output

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["BatchResult", "JsonStateProcessor", "PickledBatchResult", "PickledStateProcessor", "Processor"]

StateT = TypeVar("StateT")
OutT = TypeVar("OutT", bound="BatchResult", covariant=True)
PickledOutT = TypeVar("PickledOutT", bound="PickledBatchResult", covariant=True)


class BatchResult(Protocol):
    """What the driver reads of every path's output (the sinks read the rest)."""

    @property
    def metrics(self) -> dict[str, Any]: ...

    @property
    def per_sink(self) -> Sequence[Any]:
        """One payload per sink of the pipeline, in ``Pipeline.sinks`` order: an :class:`Output`
        (native and keyed paths) or a list of rows (general path)."""

    @property
    def dead(self) -> Output | list[dict[str, Any]]:
        """The dead letters: computed by Spark (native path) or as rows."""


class PickledBatchResult(BatchResult, Protocol):
    @property
    def delta(self) -> Any:
        """What changed in the state, committed as the batch's delta."""


@runtime_checkable
class JsonStateProcessor(Protocol[StateT, OutT]):
    def empty_state(self) -> StateT: ...

    def state_from_json(self, data: dict[str, Any]) -> StateT: ...

    def state_to_json(self, state: StateT) -> dict[str, Any]: ...

    def run(self, state: StateT, df: DataFrame | None, batch_id: int, clock_ms: int, spark: SparkSession,
            end_of_input: bool = False) -> OutT:
        """Run one batch (``df``; ``None`` for a batch without rows), updating ``state`` in place."""


@runtime_checkable
class PickledStateProcessor(Protocol[StateT, PickledOutT]):
    def empty_state(self) -> StateT: ...

    def rebind(self, loaded: StateT) -> StateT:
        """The loaded state in operators built from the current code."""

    def apply_delta(self, state: StateT, delta: StateT) -> StateT:
        """The state after ``delta`` (returned, not changed in place)."""

    def totals(self, state: StateT) -> dict[str, Any]:
        """The raw metrics of the state's last batch, whose counters are running totals
        (:data:`lowwater.metrics.line.GENERAL_RUNNING_TOTALS`); zeros before the first batch."""

    def run(self, state: StateT, df: DataFrame | None, batch_id: int, clock_ms: int,
            end_of_input: bool = False) -> PickledOutT:
        """Run one batch, updating ``state`` in place; the output carries the delta."""


Processor = JsonStateProcessor[Any, BatchResult] | PickledStateProcessor[Any, PickledBatchResult]
