"""The general path: the reference runtime's operators, stepped once per Spark micro-batch.

The batch's rows come to the driver in arrival order (``_seq``, else partition and
offset) and pass through a :class:`~lowwater.runtime.job.CompiledJob`; its state is
versioned by batch id like the native path's. Any pipeline runs here: sessions, custom
triggers, process functions, Python maps and filters, user generators, classic
assigners. It is exact by construction and as fast as the driver can step records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lowwater.api.environment import StreamExecutionEnvironment
from lowwater.api.sinks import Sink
from lowwater.api.sources import SourceBatch, SourceRecord
from lowwater.core.clock import ManualClock
from lowwater.runtime.job import CompiledJob
from lowwater.spark.native import unparsed_dead_letter
from lowwater.spark.sources import SparkSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["GeneralProcessor"]


class _Capture(Sink):
    def __init__(self) -> None:
        self.rows: list[Any] = []

    def write_batch(self, batch_id: int, rows: Any) -> None:
        self.rows = list(rows)


@dataclass
class GeneralOutput:
    per_sink: list[list[Any]]
    metrics: dict[str, Any]
    delta: Any
    dead: list[dict[str, Any]] = field(default_factory=list)


class GeneralProcessor:
    def __init__(self, env: StreamExecutionEnvironment, source: SparkSource) -> None:
        self.env = env
        self.source = source

    def empty_state(self) -> CompiledJob:
        job = CompiledJob(self.env, ManualClock(0))
        job.detach_sinks()
        job.bound_histories()
        return job

    def rebind(self, loaded: CompiledJob) -> CompiledJob:
        """The loaded state in operators built from the current pipeline (a fixed function takes effect)."""
        job = self.empty_state()
        job.restore_from(loaded)
        job.bound_histories()  # the restored exchanges are the checkpoint's
        return job

    @staticmethod
    def apply_delta(state: CompiledJob, delta: CompiledJob) -> None:
        state.__dict__.update(delta.__dict__)

    def sinks(self, job: CompiledJob) -> int:
        return len(job.sinks)

    def run(self, job: CompiledJob, df: DataFrame | None, batch_id: int, clock_ms: int,
            end_of_input: bool = False) -> GeneralOutput:
        captures = [_Capture() for _ in job.sinks]
        unparsed: list[dict[str, Any]] = []
        job.attach_sinks(captures)
        try:
            if end_of_input:
                m = job.finish(batch_id)
            else:
                items: list[SourceRecord] = []
                if df is not None:
                    fields = self.source.fields()
                    extra = [c for c in ("_corrupt", "_file") if c in df.columns]
                    rows = df.orderBy("_seq", "_partition", "_offset").select(
                        "_partition", "_offset", "_source_ts", *fields, *extra
                    ).collect()
                    for r in rows:
                        if extra and r["_corrupt"] is not None:  # as on the native path
                            unparsed.append(unparsed_dead_letter(r))
                            continue
                        items.append(SourceRecord({f: r[f] for f in fields}, int(r["_partition"]),
                                                  None if r["_offset"] is None else int(r["_offset"]),
                                                  None if r["_source_ts"] is None else int(r["_source_ts"])))
                m = job.step(batch_id, [SourceBatch(tuple(items))], clock_ms)
        finally:
            job.detach_sinks()
        metrics = m.flat(job.direct)
        metrics["rows_in"] += len(unparsed)
        metrics["rows_dead_lettered"] += len(unparsed)
        return GeneralOutput([c.rows for c in captures], metrics, job, dead=[*unparsed, *job.dead.rows])
