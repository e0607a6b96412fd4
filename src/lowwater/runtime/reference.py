"""The reference runtime: the executable specification of lowwater's semantics.

It runs a pipeline in-process over partitioned input with explicit micro-batch
boundaries and an injected clock:

1. Each source batch's records go through the pipeline in arrival order. The window
   operator judges them against the watermark it holds, the one combined at the end
   of the previous batch.
2. At the end of the batch, in topological order, every lane's generator emits
   (periodic emission), each operator combines its input lanes once (the minimum over
   non-idle lanes, never regressing), fires what that watermark triggers, and then
   forwards it.
3. After a bounded input ends, a ``MAX`` watermark fires every remaining window.

Use it to unit-test pipelines, as PySpark's ``TwsTester`` is used: the Spark engine
must give the same results.
"""

from __future__ import annotations

import uuid
from typing import Any

from lowwater.core.clock import Clock, ManualClock, SystemClock
from lowwater.graph import PipelineLike, as_pipeline
from lowwater.graph.field_check import check_field_names
from lowwater.graph.sinks import Sink, bind_job, check_new_job
from lowwater.metrics.names import PartitionNames
from lowwater.runtime.job import CompiledJob
from lowwater.runtime.nodes import Node
from lowwater.runtime.result import BatchMetrics, JobResult

__all__ = ["ReferenceRuntime"]


class ReferenceRuntime:
    """Runs a :class:`~lowwater.graph.Pipeline` (or a ``StreamExecutionEnvironment``'s) in-process.

    Parameters
    ----------
    clock:
        Processing time. A batch that states its processing time sets the clock to it;
        otherwise the given clock is read (the system clock by default).
    max_batches:
        Stop after this many batches (for unbounded sources); no end-of-input watermark.
    dead_letter_sink:
        Receives, per batch, the records that cannot be processed (a missing key, timestamp
        or value), each as ``{"reason", "partition", "offset", "record"}``. They are also in
        ``JobResult.dead_letters`` and always counted in the metrics.
    """

    def __init__(self, clock: Clock | None = None, max_batches: int | None = None,
                 dead_letter_sink: Sink | None = None) -> None:
        self.user_clock = clock
        self.max_batches = max_batches
        if dead_letter_sink is not None and not isinstance(dead_letter_sink, Sink):
            from lowwater.core.errors import ConfigurationError

            raise ConfigurationError("dead_letter_sink",
                                     f"expected a lowwater Sink, got {type(dead_letter_sink).__name__}")
        self.dead_letter_sink = dead_letter_sink
        self.nodes: list[Node] = []
        """The compiled operators of the last ``execute`` (for inspection after a failure)."""

    def execute(self, pipeline: PipelineLike, job_name: str = "lowwater job") -> JobResult:
        manual = self.user_clock if isinstance(self.user_clock, ManualClock) else ManualClock(0)
        fallback: Clock = self.user_clock or SystemClock()
        p = as_pipeline(pipeline)
        p.check_dead_letter_sink(self.dead_letter_sink)
        check_field_names(p)  # as on Spark: a misspelt field is an error, not a dead letter per record
        job = CompiledJob(p, manual)
        self.nodes = job.nodes
        # a reference run never resumes: each is a new job, refused where a Spark job on a new
        # checkpoint is (a directory or Delta table another job wrote), else it would mix or
        # append its rows beside that job's
        sinks = [*(t.sink for t in p.sinks), self.dead_letter_sink]
        bind_job(sinks, uuid.uuid4().hex, resumes=False)
        check_new_job(sinks)
        job.start()
        dead_sink = self.dead_letter_sink
        if dead_sink is not None:
            dead_sink.open()
        dead: list[dict[str, Any]] = []

        def collect_dead(batch_id: int) -> None:
            dead.extend(job.dead.rows)
            if dead_sink is not None:
                dead_sink.write_batch(batch_id, list(job.dead.rows))

        iterators = [s.source.batches() for s in job.sources]
        metrics: list[BatchMetrics] = []
        batch_id = 0
        while self.max_batches is None or batch_id < self.max_batches:
            batches = [next(it, None) for it in iterators]
            if all(b is None for b in batches):
                break
            times = [b.processing_time_ms for b in batches if b is not None and b.processing_time_ms is not None]
            now = max(times) if times else fallback.now_ms()
            metrics.append(job.step(batch_id, batches, now))
            collect_dead(batch_id)
            batch_id += 1
        if all(s.source.bounded for s in job.sources) and (self.max_batches is None or batch_id < self.max_batches):
            metrics.append(job.finish(batch_id))
            collect_dead(batch_id)
        for n in job.sinks:
            n.sink.close()
        if dead_sink is not None:
            dead_sink.close()
        labels = p.source_labels()
        names = PartitionNames.of([(labels.get(t.id, t.name), t.source) for t in p.sources])
        return JobResult(job_name, metrics, job.watermark_history(), dead_letters=dead, direct=job.direct,
                         partition_names=names)
