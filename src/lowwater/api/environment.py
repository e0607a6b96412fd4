"""The execution environment: where pipelines start and how they run."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lowwater.api.datastream import DataStream
from lowwater.api.runtimes import Runtime, RuntimeName, runtime_named
from lowwater.core.clock import Clock
from lowwater.core.errors import ConfigurationError, LowwaterError
from lowwater.core.time import DurationLike, to_millis
from lowwater.core.time_characteristic import TimeCharacteristic
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.graph import Pipeline
from lowwater.graph.sources import CollectionSource, FunctionSource, Source, SourceFunction
from lowwater.graph.transformations import SinkTransformation, SourceTransformation

__all__ = ["RuntimeName", "StreamExecutionEnvironment"]


def _positive_interval(interval: DurationLike) -> int:
    ms = to_millis(interval, name="auto_watermark_interval")
    if ms <= 0:
        raise ConfigurationError("auto_watermark_interval", f"must be > 0 ms, got {ms}: Flink's 0 turns periodic "
                                 "watermarks off, and lowwater emits them at the end of every micro-batch")
    return ms


class StreamExecutionEnvironment:
    """Holds the job's settings and sinks; ``execute`` runs it on a runtime.

    Parameters
    ----------
    time_characteristic:
        Event time by default (see :meth:`set_stream_time_characteristic`).
    auto_watermark_interval:
        Flink's ``setAutoWatermarkInterval`` (default 200 ms), kept for its API: it does not change
        when lowwater emits. lowwater's period is the micro-batch: every partition's generator
        emits at the end of each one (``docs/semantics.md``). It must be > 0 ms, since Flink's 0
        turns periodic emission off, which lowwater does not do.
    """

    def __init__(
        self,
        time_characteristic: TimeCharacteristic = TimeCharacteristic.EVENT_TIME,
        auto_watermark_interval: DurationLike = 200,
    ) -> None:
        self.time_characteristic = time_characteristic
        self.auto_watermark_interval_ms = _positive_interval(auto_watermark_interval)
        self._sinks: list[SinkTransformation] = []

    @staticmethod
    def get_execution_environment() -> StreamExecutionEnvironment:
        return StreamExecutionEnvironment()

    def set_stream_time_characteristic(self, characteristic: TimeCharacteristic) -> None:
        if not isinstance(characteristic, TimeCharacteristic):
            raise ConfigurationError("characteristic", f"expected a TimeCharacteristic, got {characteristic!r}")
        self.time_characteristic = characteristic

    def set_auto_watermark_interval(self, interval: DurationLike) -> None:
        """See the class's ``auto_watermark_interval``: kept, with no effect on when watermarks are emitted."""
        self.auto_watermark_interval_ms = _positive_interval(interval)

    # -- sources ----------------------------------------------------------------------
    def from_source(
        self, source: Source, strategy: WatermarkStrategy[Any] | None = None, name: str = "source"
    ) -> DataStream:
        """A stream from a partitioned source, with per-partition watermarks from ``strategy``."""
        if not isinstance(source, Source):
            raise ConfigurationError("source", f"expected a lowwater Source, got {type(source).__name__}")
        if strategy is not None and not isinstance(strategy, WatermarkStrategy):
            raise ConfigurationError("strategy", f"expected a WatermarkStrategy, got {type(strategy).__name__}")
        return DataStream(self, SourceTransformation(name, source, strategy))

    def from_collection(self, elements: Iterable[Any], **kwargs: Any) -> DataStream:
        """One micro-batch of in-memory elements (see :class:`CollectionSource`)."""
        return self.from_source(CollectionSource.of(elements, **kwargs), name="collection")

    def add_source(self, function: SourceFunction, parallelism: int = 1, name: str = "source") -> DataStream:
        """A classic :class:`SourceFunction` that may emit its own timestamps and watermarks."""
        return self.from_source(FunctionSource(function, parallelism), name=name)

    def _register_sink(self, t: SinkTransformation) -> None:
        self._sinks.append(t)

    @property
    def sinks(self) -> list[SinkTransformation]:
        return list(self._sinks)

    # -- running ---------------------------------------------------------------------
    def pipeline(self) -> Pipeline:
        """The pipelines built so far, as a value a runtime runs (the graph walked once)."""
        return Pipeline.of(self._sinks, self.time_characteristic, self.auto_watermark_interval_ms)

    def execute(
        self, job_name: str = "lowwater job", *, runtime: RuntimeName | Runtime = "reference",
        clock: Clock | None = None, **options: Any,
    ) -> Any:
        """Run every pipeline that ends in a sink; returns the runtime's job result.

        ``runtime`` is a name (``"reference"``, ``"spark"``: see :mod:`lowwater.api.runtimes`),
        made with ``clock`` and ``options``, or a runtime object, which is used as it is.
        """
        if not self._sinks:
            raise LowwaterError("no sinks: add one with stream.add_sink(...) or stream.collect() before execute()")
        if not isinstance(runtime, str):
            if clock is not None or options:
                raise ConfigurationError(
                    "runtime", "options and clock go to the runtime's constructor when it is given as an object")
            return runtime.execute(self.pipeline(), job_name)
        if runtime == "spark" and "checkpoint_location" not in options:
            raise ConfigurationError(
                "checkpoint_location", "the spark runtime needs one: env.execute(runtime='spark', "
                "checkpoint_location='checkpoints/my-job')"
            )
        return runtime_named(runtime, clock=clock, **options).execute(self.pipeline(), job_name)
