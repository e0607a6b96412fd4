"""Sources for pipelines: records with a partition, an offset and maybe a timestamp.

A source delivers micro-batches. Each batch holds :class:`SourceRecord` items in
arrival order (offset order within a partition) and, for sources that supply their
own event time, :class:`SourceWatermark` and :class:`SourceIdle` items. A source's
watermarks take effect at the end of the batch, like generated ones.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lowwater.core.errors import ConfigurationError, article, shown
from lowwater.core.watermarks import Watermark
from lowwater.core.watermarks.watermark import watermark_time

__all__ = [
    "CollectionSource",
    "FunctionSource",
    "Source",
    "SourceBatch",
    "SourceContext",
    "SourceFunction",
    "SourceIdle",
    "SourceItem",
    "SourceRecord",
    "SourceWatermark",
]


@dataclass(frozen=True)
class SourceRecord:
    """One record: the element, its partition and offset, and the source timestamp if any.

    ``offset`` is ``None`` when the source has no position for it (a DataFrame without an
    offset column). A stored record that is not an element (``error`` set, ``value`` None)
    is counted and sent to the dead-letter output with ``error`` as its reason.
    """

    value: Any
    partition: int = 0
    offset: int | None = 0
    timestamp: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class SourceWatermark:
    """A watermark the source itself emits for one partition."""

    partition: int
    timestamp: int


@dataclass(frozen=True)
class SourceIdle:
    """The source marks one partition temporarily idle."""

    partition: int


SourceItem = SourceRecord | SourceWatermark | SourceIdle


@dataclass(frozen=True)
class SourceBatch:
    """One micro-batch of a source, in arrival order."""

    items: tuple[SourceItem, ...] = ()
    processing_time_ms: int | None = None
    """The clock at the end of this batch; ``None`` means the runtime's clock."""
    arrival: tuple[int, ...] | None = None
    """With several sources: each item's position in the micro-batch across all sources
    (the runtime interleaves the sources' items in this order); ``None``: after the
    previous source's items."""


class Source(ABC):
    """A partitioned, replayable input."""

    @abstractmethod
    def partitions(self) -> list[int]:
        """The partitions known at the start."""

    @abstractmethod
    def batches(self) -> Iterator[SourceBatch]:
        """The micro-batches, in order. A bounded source ends; then a MAX watermark follows."""

    @property
    def bounded(self) -> bool:
        return True

    @property
    def finishes_alone(self) -> bool:
        """Whether running out of batches while other sources go on finishes this source: it sends
        MAX on every partition and stops holding a union back, as a bounded source does in Flink.
        A source Spark reads as a stream says no (:class:`~lowwater.spark.source_base.SparkSource`)."""
        return True


def _partition_getter(partition_of: str | Callable[[Any], int] | None) -> Callable[[Any], int]:
    if partition_of is None:
        return lambda e: 0
    if callable(partition_of):
        return partition_of
    name = partition_of

    def get(e: Any) -> int:
        p = e.get(name, 0) if isinstance(e, dict) else getattr(e, name, 0)
        return 0 if p is None else int(p)

    return get


class CollectionSource(Source):
    """In-memory micro-batches of elements; handy for tests and the scenario runner.

    Parameters
    ----------
    batches:
        Each batch is a sequence of elements in arrival order.
    partitions:
        How many partitions exist from the start (``0..n-1``), or the list of ids. A
        partition with no elements holds back the combined watermark, as in Flink.
    partition_of:
        A field name or a function giving an element's partition (default 0).
    timestamp_of:
        A function giving the source timestamp of an element (like a Kafka record
        timestamp); ``None`` means the records carry none.
    processing_times_ms:
        The clock at the end of each batch.
    arrival:
        With several sources read together: each element's position in its micro-batch
        across all of them (see :attr:`SourceBatch.arrival`).
    """

    def __init__(
        self,
        batches: Sequence[Sequence[Any]],
        *,
        partitions: int | Sequence[int] | None = None,
        partition_of: str | Callable[[Any], int] | None = None,
        timestamp_of: Callable[[Any], int | None] | None = None,
        processing_times_ms: Sequence[int] | None = None,
        arrival: Sequence[Sequence[int]] | None = None,
    ) -> None:
        for i, b in enumerate(batches):  # a dict's keys or a string's letters as a batch's elements
            if isinstance(b, (Mapping, str, bytes)) or not isinstance(b, Iterable):
                raise ConfigurationError(
                    "batches", f"each batch is a sequence of elements, but batch {i} is "
                    f"{article(type(b).__name__)} {type(b).__name__} ({shown(b)[:60]}): given a list of elements, "
                    "each element would be a batch of its keys. Hint: CollectionSource.of(elements) puts them in "
                    "one batch, as CollectionSource([elements]) does; CollectionSource([[e] for e in elements]) "
                    "makes a batch of each")
        if arrival is not None and [len(a) for a in arrival] != [len(b) for b in batches]:
            raise ConfigurationError("arrival", "give one position per element of every batch")
        self._arrival = [tuple(a) for a in arrival] if arrival is not None else None
        if processing_times_ms is not None and len(processing_times_ms) != len(batches):
            raise ConfigurationError(
                "processing_times_ms",
                f"has {len(processing_times_ms)} entries for {len(batches)} batches; give one per batch",
            )
        self._batches = [list(b) for b in batches]
        self._partition_of = _partition_getter(partition_of)
        self._timestamp_of = timestamp_of
        self._processing_times = list(processing_times_ms) if processing_times_ms is not None else None
        if partitions is None:
            seen = sorted({self._partition_of(e) for b in self._batches for e in b})
            self._partitions = seen or [0]
        elif isinstance(partitions, int):
            if partitions <= 0:
                raise ConfigurationError("partitions", f"must be > 0, got {partitions}")
            self._partitions = list(range(partitions))
        else:
            self._partitions = list(partitions)

    @staticmethod
    def of(elements: Iterable[Any], **kwargs: Any) -> CollectionSource:
        """All elements in one batch."""
        return CollectionSource([list(elements)], **kwargs)

    @staticmethod
    def per_element(elements: Iterable[Any], **kwargs: Any) -> CollectionSource:
        """Each element its own micro-batch: the watermark is emitted after every element."""
        return CollectionSource([[e] for e in elements], **kwargs)

    def partitions(self) -> list[int]:
        return list(self._partitions)

    def batches(self) -> Iterator[SourceBatch]:
        offsets: dict[int, int] = {}
        for i, batch in enumerate(self._batches):
            items: list[SourceItem] = []
            for e in batch:
                p = self._partition_of(e)
                off = offsets.get(p, 0)
                offsets[p] = off + 1
                ts = self._timestamp_of(e) if self._timestamp_of else None
                items.append(SourceRecord(e, p, off, ts))
            pt = self._processing_times[i] if self._processing_times is not None else None
            yield SourceBatch(tuple(items), pt, self._arrival[i] if self._arrival is not None else None)


# -- the seeds' SourceFunction API ------------------------------------------------------
@dataclass
class SourceContext:
    """What a :class:`SourceFunction` emits through. Each watermark or idle mark ends a micro-batch."""

    partition: int = 0
    _segments: list[list[SourceItem]] = field(default_factory=lambda: [[]])
    _offset: int = 0

    def collect(self, element: Any) -> None:
        self._segments[-1].append(SourceRecord(element, self.partition, self._offset, None))
        self._offset += 1

    def collect_with_timestamp(self, element: Any, timestamp: int) -> None:
        self._segments[-1].append(SourceRecord(element, self.partition, self._offset, int(timestamp)))
        self._offset += 1

    def emit_watermark(self, watermark: Watermark | int) -> None:
        self._segments[-1].append(SourceWatermark(self.partition, watermark_time(watermark)))
        self._segments.append([])

    def mark_as_temporarily_idle(self) -> None:
        self._segments[-1].append(SourceIdle(self.partition))
        self._segments.append([])


class SourceFunction(ABC):
    """The classic source: ``run(ctx)`` emits elements, timestamps and watermarks."""

    @abstractmethod
    def run(self, ctx: SourceContext) -> None: ...

    def cancel(self) -> None:
        """Called when the job stops early."""


class FunctionSource(Source):
    """Runs one :class:`SourceFunction` per partition. Batch ``k`` holds every partition's
    ``k``-th segment, where each emitted watermark or idle mark closes a segment."""

    def __init__(self, function: SourceFunction | Callable[[int], SourceFunction], parallelism: int = 1) -> None:
        if parallelism <= 0:
            raise ConfigurationError("parallelism", f"must be > 0, got {parallelism}")
        self._function = function
        self._parallelism = parallelism

    def partitions(self) -> list[int]:
        return list(range(self._parallelism))

    def batches(self) -> Iterator[SourceBatch]:
        import copy

        per_partition: list[list[list[SourceItem]]] = []
        for p in range(self._parallelism):
            if isinstance(self._function, SourceFunction):
                fn = copy.deepcopy(self._function)
            else:
                fn = self._function(p)
            ctx = SourceContext(partition=p)
            fn.run(ctx)
            segments = ctx._segments
            if segments and not segments[-1]:
                segments = segments[:-1]
            per_partition.append(segments)
        n = max((len(s) for s in per_partition), default=0)
        for k in range(n):
            items: list[SourceItem] = []
            for segs in per_partition:
                if k < len(segs):
                    items.extend(segs[k])
            yield SourceBatch(tuple(items))
