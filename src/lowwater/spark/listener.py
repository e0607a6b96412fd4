"""lowwater's metrics next to Spark's ``StreamingQueryProgress``.

Spark's progress events know rows and durations, but nothing of lowwater's watermarks:
the engine runs inside ``foreachBatch``, where ``df.observe`` metrics do not reach the
query's progress. :class:`LowwaterProgressListener` joins the two by batch id. For each
``QueryProgressEvent`` of a lowwater query it reads that batch's line from the
checkpoint's metrics log (written before Spark reports the batch's progress). It logs
them together on the ``lowwater.progress`` logger and hands them to an optional callback::

    listener = LowwaterProgressListener("/chk/clicks", on_progress=print)
    spark.streams.addListener(listener)
    SparkRuntime("/chk/clicks", spark=spark).execute(env, "clicks")
    spark.streams.removeListener(listener)

For a checkpoint on a URI (``hdfs://...``, no metrics log to read), hand the listener the
lines as the engine reports them: ``SparkRuntime(uri, on_metrics=listener.record)``.

``SparkJob.progress()`` gives the same join for a query's ``recentProgress``.

A listener lives as long as the job, weeks for a stream: it keeps a line only until its batch's
event joins it, and the last :data:`RECENT_EVENTS` joined events (``events``), as Spark keeps
its query's ``recentProgress``. Before session 41 it kept every line and every event (a line
alone is about 3 KB of the driver's memory as a dict: 50 MB a day at a 5-second trigger, its
event's Spark progress more), and read the whole metrics log of a restarted checkpoint at its
first event.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from pyspark.sql.streaming.listener import (
    JStreamingQueryListener,
    QueryProgressEvent,
    StreamingQueryListener,
    StreamingQueryProgress,
)

from lowwater.metrics.log import MetricsLog

__all__ = ["LowwaterProgressListener", "progress_fields"]

log = logging.getLogger("lowwater.progress")

#: Fields of Spark's StreamingQueryProgress kept next to lowwater's line.
_SPARK_FIELDS = ("name", "batchId", "timestamp", "numInputRows", "inputRowsPerSecond", "processedRowsPerSecond")


def progress_fields(progress: Any) -> dict[str, Any]:
    """The parts of a ``StreamingQueryProgress`` worth showing next to lowwater's metrics."""
    out = {f: getattr(progress, f, None) for f in _SPARK_FIELDS}
    out["durationMs"] = dict(getattr(progress, "durationMs", None) or {})
    return out


class _JsonProgress(JStreamingQueryListener):
    """Hands a progress event to the listener as PySpark's own ``StreamingQuery.recentProgress``
    does: from the progress's JSON, one py4j call. PySpark's listener builds it from the Java
    object instead, a py4j call per field and per map entry, and each map's end is a Java
    exception, which PySpark's error conversion checks against 14 exception classes, each named
    through py4j's package lookup (class loads that fail after searching every jar). Measured:
    about 166 ms of the driver JVM's CPU and 45 ms of Python's per event (docs/performance.md),
    on batches that cost a few hundred. Every other event keeps PySpark's own conversion."""

    def onQueryProgress(self, jevent: Any) -> None:
        progress = StreamingQueryProgress.fromJson(json.loads(jevent.progress().json()))
        self.pylistener.onQueryProgress(QueryProgressEvent(progress=progress))


RECENT_EVENTS = 100
"""How many joined events a :class:`LowwaterProgressListener` keeps (Spark's
``spark.sql.streaming.numRecentProgressUpdates`` is 100 too)."""


class LowwaterProgressListener(StreamingQueryListener):
    """Joins each progress event of a query with lowwater's metrics line for that batch.

    Parameters
    ----------
    checkpoint:
        The job's checkpoint location (the one given to ``SparkRuntime``). Its metrics log is
        read for each event; for a checkpoint on a URI, which has none, pass
        :meth:`record` as the runtime's ``on_metrics``.
    query_name:
        Only events of this query (``None``: every query whose batch has a line).
    on_progress:
        Called with ``{"batch_id", "spark": {...}, "lowwater": {...} | None}`` per event.
    """

    def __init__(self, checkpoint: str | os.PathLike[str], query_name: str | None = None,
                 on_progress: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.follower = MetricsLog(checkpoint).follow(from_end=True)  # the batches from now on
        self.query_name = query_name
        self.on_progress = on_progress
        self.lines: dict[int, dict[str, Any]] = {}
        """Lines not yet joined, by Spark's batch id."""
        self.events: deque[dict[str, Any]] = deque(maxlen=RECENT_EVENTS)
        """The last :data:`RECENT_EVENTS` joined events, oldest first."""
        self._lock = threading.Lock()

    @property
    def _jlistener(self) -> Any:
        """The JVM side that ``spark.streams.addListener`` registers (PySpark's own property, with
        :class:`_JsonProgress` in place of its ``JStreamingQueryListener``)."""
        if not hasattr(self, "_jlistenerobj"):
            from pyspark import SparkContext

            jvm: Any = SparkContext._jvm
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_JsonProgress(self))
        return self._jlistenerobj

    def record(self, line: dict[str, Any]) -> None:
        """Take a batch's metrics line as the engine reports it: ``SparkRuntime(..., on_metrics=
        listener.record)``. A checkpoint on a Hadoop URI (``hdfs:``, ``s3a:``, ``file:``) has no
        ``metrics.jsonl`` to read, so this is how its events get their lines; the engine reports
        a batch before Spark posts the batch's progress."""
        with self._lock:
            self._keep(line)

    def _keep(self, line: dict[str, Any]) -> None:
        spark_id = line.get("spark_batch_id", line["batch_id"])  # Spark's id, not lowwater's step id
        if spark_id is not None:
            self.lines[int(spark_id)] = line

    def _line(self, batch_id: int) -> dict[str, Any] | None:
        """The line of ``batch_id``, taken out with every older one: no event comes for those."""
        for line in self.follower.poll():
            self._keep(line)
        for older in [b for b in self.lines if b < batch_id]:
            del self.lines[older]
        return self.lines.pop(batch_id, None)

    def onQueryStarted(self, event: Any) -> None:
        log.debug("query %s started (id %s)", event.name, event.id)

    def onQueryProgress(self, event: Any) -> None:
        p = event.progress
        if self.query_name is not None and p.name != self.query_name:
            return
        with self._lock:
            line = self._line(int(p.batchId))
            joined = {"batch_id": int(p.batchId), "spark": progress_fields(p), "lowwater": line}
            self.events.append(joined)
        if line is None:
            log.info("query %s batch %d: %d input rows (no lowwater metrics line)", p.name, p.batchId, p.numInputRows)
        else:
            log.info("query %s batch %d: %d input rows, %.0f rows/s; combined watermark %s, idle %s, late %d, "
                     "windows fired %d", p.name, p.batchId, p.numInputRows, p.processedRowsPerSecond or 0.0,
                     line.get("combined_watermark"), line.get("idle_partitions"), line.get("rows_late", 0),
                     line.get("windows_fired", 0))
        if self.on_progress is not None:
            self.on_progress(joined)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        if event.exception:
            log.info("query %s ended with an error: %s", event.id, str(event.exception).splitlines()[0])
