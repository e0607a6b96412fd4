"""Shared pieces of the benchmarks: the log, the two engines, timing from Spark's progress.

Both engines read the SAME partitioned log the SAME way: ``PartitionedLogSource.spark_stream``
(Parquet segments, ``value`` parsed with ``from_json``), ``maxFilesPerTrigger`` = partitions
and segment mtimes in write order, so micro-batch ``i`` is batch ``i`` of every partition.
Batch times come from Spark's own streaming progress (``durationMs.triggerExecution``), the
same clock for both engines: listing files, planning, the batch itself and Spark's commits.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lowwater.api import StreamExecutionEnvironment
from lowwater.api.sinks import Sink
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import SlidingEventTimeWindows, TumblingEventTimeWindows
from lowwater.io import PartitionedLogReader, PartitionedLogWriter, SyntheticStream
from lowwater.spark.sinks import DataFrameSink

FIELDS = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]
START_MS = 1_700_000_000_000
MTIME_BASE_S = 1_000_000


# -- the log ------------------------------------------------------------------------------------
def write_log(root: Path, stream: SyntheticStream, batches: int, rows: int) -> int:
    """Write ``batches`` batches of ``rows`` slots as Parquet segments (one per partition per batch).

    The files are exactly what ``stream.write_to(PartitionedLogWriter(root, "parquet"), ...)``
    writes (same columns, types, JSON text and segment names; :func:`check_same_as_writer`
    verifies it), but built column-wise with NumPy/Arrow: the pure-Python writer needs about
    10 s per million rows. Segment mtimes are set in write order (batch, then partition).
    Returns the number of records.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    writer = PartitionedLogWriter(root, "parquet", fsync=False)
    for p in range(stream.partitions):
        writer.create_partition(p)
    typed = typed_copy(root) if bench_source() == "parquet" else None
    if typed is not None:
        typed.mkdir(parents=True, exist_ok=True)
    next_offset = dict.fromkeys(range(stream.partitions), 0)
    written = 0
    stamp = 0
    for i in range(batches):
        cols = stream.batch_columns(i, rows)
        order = np.argsort(cols["partition"], kind="stable")
        parts = cols["partition"][order]
        bounds = np.searchsorted(parts, np.arange(stream.partitions + 1))
        key = pa.array(cols["key"][order])
        ts = pa.array(cols["ts"][order])
        value = pa.array(cols["value"][order])
        text = pc.binary_join_element_wise(
            '{"key":"', key, '","ts":', pc.cast(ts, pa.string()), ',"value":', pc.cast(value, pa.string()), "}", "",
        )
        offsets = cols["offset"][order]
        stamps = cols["timestamp"][order]
        for p in range(stream.partitions):
            lo, hi = int(bounds[p]), int(bounds[p + 1])
            if hi == lo:
                continue
            first = int(offsets[lo])
            assert first == next_offset[p], (p, first, next_offset[p])
            next_offset[p] = first + (hi - lo)
            table = pa.table({
                "partition": pa.array(np.full(hi - lo, p, dtype=np.int32), type=pa.int32()),
                "offset": pa.array(offsets[lo:hi], type=pa.int64()),
                "timestamp": pa.array(stamps[lo:hi], type=pa.int64()),
                "value": text.slice(lo, hi - lo),
            })
            directory = root / f"partition={p}"
            tmp = directory / f".tmp-segment-{first:020d}"
            pq.write_table(table, tmp)
            final = directory / f"segment-{first:020d}.parquet"
            os.replace(tmp, final)
            os.utime(final, (MTIME_BASE_S + stamp, MTIME_BASE_S + stamp))
            if typed is not None:  # the same records as typed columns, for LOWWATER_BENCH_SOURCE=parquet
                copy = typed / f"batch-{i:06d}-p{p}.parquet"
                pq.write_table(pa.table({"partition": table["partition"], "offset": table["offset"],
                                         "key": key.slice(lo, hi - lo), "ts": ts.slice(lo, hi - lo),
                                         "value": value.slice(lo, hi - lo)}), copy)
                os.utime(copy, (MTIME_BASE_S + stamp, MTIME_BASE_S + stamp))
            stamp += 1
            written += hi - lo
    return written


def stamp_in_write_order(root: Path, partitions: int) -> None:
    """Distinct mtimes in write order for a log written by ``PartitionedLogWriter`` (batch, then partition)."""
    segments = sorted(root.glob("partition=*/segment-*"),
                      key=lambda f: (int(f.stem.split("-")[1]), int(f.parent.name.split("=")[1])))
    for i, f in enumerate(segments):
        os.utime(f, (MTIME_BASE_S + i, MTIME_BASE_S + i))


def check_same_as_writer(tmp: Path, stream: SyntheticStream, batches: int, rows: int) -> None:
    """The fast writer and lowwater's own writer produce the same log (records, offsets, segments)."""
    a, b = tmp / "fast", tmp / "slow"
    write_log(a, stream, batches, rows)
    stream.write_to(PartitionedLogWriter(b, "parquet", fsync=False), batches, rows)
    ra, rb = PartitionedLogReader(a), PartitionedLogReader(b)
    start = dict.fromkeys(ra.partitions(), 0)
    assert ra.end_offsets() == rb.end_offsets()
    assert ra.read(start) == rb.read(start), "fast log writer differs from PartitionedLogWriter"
    names = sorted(str(p.relative_to(a)) for p in a.rglob("segment-*"))
    assert names == sorted(str(p.relative_to(b)) for p in b.rglob("segment-*"))
    shutil.rmtree(a)
    shutil.rmtree(b)


def hwm_kb(pid: int) -> int:
    """A process's peak resident set (``VmHWM``), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


# -- the engines ----------------------------------------------------------------------------------
class CountingSink(DataFrameSink):
    """Spark's ``noop`` sink for lowwater's results DataFrame: computed on the executors, discarded.

    ``rows`` is the number of result rows, from the engine's ``windows_fired`` metric (the engine
    counts the results it hands to its sinks)."""

    reads_every_row = True  # one noop write: the engine counts the results as it runs
    empty_batches = False  # as Spark's noop sink, which runs nothing for a batch with no output

    def __init__(self) -> None:
        self.rows = 0

    def write(self, df: Any, batch_id: int) -> None:
        df.write.format("noop").mode("overwrite").save()

    def write_batch(self, batch_id: int, rows: Sequence[Any]) -> None:
        self.rows += len(rows)


def progress_times(progress: list[Any], sampler: Any = None) -> list[dict[str, Any]]:
    """Per micro-batch that read input: rows, Spark's trigger time (ms) and, with a
    :class:`cpu.CpuSampler`, the CPU milliseconds spent during it: in all, and per part (driver, JVM,
    the executors' Python workers)."""
    out = []
    for p in progress:
        p = p if isinstance(p, dict) else json.loads(p.json)
        n = int(p.get("numInputRows", 0))
        if n:
            d = p.get("durationMs", {})
            row = {"batch_id": p["batchId"], "rows": n, "ms": int(d.get("triggerExecution", 0)),
                   "add_batch_ms": int(d.get("addBatch", 0))}
            if sampler is not None:
                row["cpu_ms"] = sampler.batch_cpu_ms(p)
                if hasattr(sampler, "batch_cpu_parts_ms"):
                    row["cpu_parts_ms"] = sampler.batch_cpu_parts_ms(p)
            out.append(row)
    return out


def files_stream(spark: Any, log: Path, partitions: int) -> Any:
    """The log's Parquet segments read by Spark's own file source, as a Kafka user's stream is read:
    the JVM reads the files (``maxFilesPerTrigger``: one segment per partition per batch, oldest
    first) and ``from_json`` parses each record's JSON text, with no Python worker. Columns:
    ``partition, offset, key, ts, value``. ``LOWWATER_BENCH_SOURCE=files`` makes both engines read
    this instead of the partitioned log's Python data source."""
    from pyspark.sql import functions as F

    if bench_source() == "parquet":
        schema = "partition INT, offset BIGINT, " + ", ".join(f"`{n}` {t}" for n, t in FIELDS)
        return (spark.readStream.schema(schema).option("maxFilesPerTrigger", partitions)
                .parquet(str(typed_copy(log))))
    struct = ", ".join(f"`{n}` {t}" for n, t in FIELDS)
    parsed = _segments(spark, log, partitions).select("partition", "offset", F.from_json("value", struct).alias("v"))
    return parsed.select("partition", "offset", "v.*")


def kafka_shaped_stream(spark: Any, log: Path, partitions: int) -> Any:
    """The log's Parquet segments as :func:`files_stream` reads them, in Spark's Kafka source
    schema (one topic; each record's ``value`` its JSON text, as bytes): what a Kafka user's
    ``KafkaSource`` reads, checked strictly by ``KafkaShapedSource``."""
    from pyspark.sql import functions as F

    return _segments(spark, log, partitions).select(
        F.lit(None).cast("binary").alias("key"), F.col("value").cast("binary").alias("value"),
        F.lit("bench").alias("topic"), "partition", "offset",
        F.timestamp_millis("timestamp").alias("timestamp"), F.lit(0).alias("timestampType"))


def _segments(spark: Any, log: Path, partitions: int) -> Any:
    """The log's Parquet segments as a stream read by Spark's file source, one segment per
    partition per batch, oldest first: ``partition, offset, timestamp, value`` (the JSON text)."""
    return (spark.readStream.schema("partition INT, offset BIGINT, timestamp BIGINT, value STRING")
            .option("maxFilesPerTrigger", partitions).option("recursiveFileLookup", "true").parquet(str(log)))


def bench_source() -> str:
    """``LOWWATER_BENCH_SOURCE``: ``log`` (default, the partitioned log's Python data source),
    ``files`` (:func:`files_stream`), ``parquet`` (:func:`files_stream` over a typed copy) or
    ``kafka``: Spark's query as with ``files`` (``from_json``), lowwater's a ``KafkaShapedSource``
    over :func:`kafka_shaped_stream`, each as its Kafka user would write it."""
    source = os.environ.get("LOWWATER_BENCH_SOURCE", "log")
    if source not in ("log", "files", "parquet", "kafka"):
        raise ValueError(f"LOWWATER_BENCH_SOURCE is log, files, parquet or kafka, not {source!r}")
    return source


def bench_slide_ms() -> int | None:
    """``LOWWATER_BENCH_SLIDE_MS``: both engines' windows slide by it (Spark's ``window(ts, size,
    slide)``, lowwater's ``SlidingEventTimeWindows.of(size, slide)``); unset, they are tumbling."""
    slide = os.environ.get("LOWWATER_BENCH_SLIDE_MS")
    return int(slide) if slide else None


def bench_window_ms(default: int) -> int:
    """``LOWWATER_BENCH_WINDOW_MS``: both engines' window size; unset, ``default``."""
    size = os.environ.get("LOWWATER_BENCH_WINDOW_MS")
    return int(size) if size else default


def typed_copy(log: Path) -> Path:
    """Where :func:`write_log` writes the log's records as typed Parquet columns (``partition,
    offset, key, ts, value``), one file per partition per batch: a stream with nothing to parse,
    as a Delta or Parquet table's."""
    return log.parent / f"{log.name}-typed"


def spark_native(spark: Any, log: Path, ckpt: Path, partitions: int, window_ms: int, bound_ms: int,
                 aggregate: str = "sum", sink: str = "noop") -> tuple[Any, list[dict[str, Any]], float]:
    """Spark's own ``withWatermark(...).groupBy(window(...), key).agg(...)``, append mode."""
    from pyspark.sql import functions as F

    from lowwater.spark.sources import PartitionedLogSource

    if bench_source() != "log":
        df = files_stream(spark, log, partitions).withColumn("event_time", F.timestamp_millis("ts"))
    else:
        df = PartitionedLogSource(log, FIELDS, max_files_per_trigger=partitions).spark_stream(spark) \
            .withColumn("event_time", F.timestamp_millis("ts"))
    agg_col = F.sum("value") if aggregate == "sum" else F.count("*")
    agg = (
        df.withWatermark("event_time", f"{bound_ms} milliseconds")
        .groupBy(F.window("event_time", f"{window_ms} milliseconds",
                          *([f"{bench_slide_ms()} milliseconds"] if bench_slide_ms() else [])), "key")
        .agg(agg_col.alias("value"))
    )
    writer = agg.writeStream.outputMode("append").option("checkpointLocation", str(ckpt))
    if sink == "memory":
        name = f"native_{int(time.time() * 1000)}"
        writer = writer.format("memory").queryName(name)
    else:
        name = None
        writer = writer.format("noop")
    started = time.monotonic()
    q = writer.trigger(availableNow=True).start()
    q.awaitTermination()
    wall = time.monotonic() - started
    if q.exception() is not None:
        raise RuntimeError(f"spark native query failed: {q.exception()}")
    return (q, name), list(q.recentProgress), wall


def lowwater_env(log: Path, partitions: int, window_ms: int, bound_ms: int, aggregate: str = "sum",
                 late_tag: Any = None, python_assigner: bool = False,
                 spark: Any = None) -> tuple[StreamExecutionEnvironment, list[Sink]]:
    from lowwater.api import CollectSink
    from lowwater.spark.sources import PartitionedLogSource

    def event_ts(element: dict[str, Any], previous: int) -> int:
        """The same field read per row by Python: a function, not a field name, so the timestamps
        and watermarks run on the executors. Nested, so that cloudpickle ships it by value."""
        return int(element["ts"])

    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(bound_ms).with_timestamp_assigner(
        event_ts if python_assigner else "ts")
    if spark is not None and bench_source() != "log":
        from lowwater.spark.dataframe_source import DataFrameSource, KafkaShapedSource

        if bench_source() == "kafka":
            src: Any = KafkaShapedSource(kafka_shaped_stream(spark, log, partitions), FIELDS)
        else:
            src = DataFrameSource(files_stream(spark, log, partitions), partition="partition", offset="offset")
    else:
        src = PartitionedLogSource(log, FIELDS, max_files_per_trigger=partitions)
    slide = bench_slide_ms()
    assigner = SlidingEventTimeWindows.of(window_ms, slide) if slide else TumblingEventTimeWindows.of(window_ms)
    windowed = env.from_source(src, strategy).key_by("key").window(assigner)
    if late_tag is not None:
        windowed = windowed.side_output_late_data(late_tag)
    result = windowed.sum("value") if aggregate == "sum" else windowed.count()
    sinks: list[Sink] = []
    if late_tag is None:
        sink: Sink = CountingSink()
        result.add_sink(sink)
        sinks.append(sink)
    else:
        results, late = CollectSink(), CollectSink()
        result.add_sink(results)
        result.get_side_output(late_tag).add_sink(late)
        sinks += [results, late]
    return env, sinks


def lowwater(spark: Any, log: Path, ckpt: Path, partitions: int, window_ms: int, bound_ms: int,
             aggregate: str = "sum", end_of_input: bool = False,
             late_tag: Any = None,
             python_assigner: bool = False) -> tuple[Any, list[Sink], list[dict[str, Any]], float]:
    """lowwater's native path; with ``python_assigner``, timestamps and watermarks from a Python
    assigner on the executors (``path="executor"``), the windows still native."""
    from lowwater.spark.engine import SparkRuntime

    env, sinks = lowwater_env(log, partitions, window_ms, bound_ms, aggregate, late_tag, python_assigner, spark)
    started = time.monotonic()
    job = SparkRuntime(str(ckpt), spark=spark, path="executor" if python_assigner else "native",
                       trigger="available_now",
                       end_of_input=end_of_input, clock=lambda b: START_MS + 1000 * b).execute(env, "bench")
    wall = time.monotonic() - started
    for s in sinks:
        if isinstance(s, CountingSink):
            s.rows = sum(int(b["metrics"].get("windows_fired") or 0) for b in job.batches())
    return job, sinks, list(job.query.recentProgress), wall


def summarize(times: list[dict[str, Any]], skip: int = 1) -> dict[str, Any]:
    """Steady state: drop the first ``skip`` batches; median and mean batch time, rows/s."""
    steady = times[skip:] if len(times) > skip else times
    ms = [t["ms"] for t in steady]
    rows = [t["rows"] for t in steady]
    med = statistics.median(ms)
    cpu = [t["cpu_ms"] for t in steady if t.get("cpu_ms") is not None]
    extra: dict[str, Any] = {}
    if cpu:
        extra = {"median_batch_cpu_ms": statistics.median(cpu),
                 "rows_per_cpu_s": round(statistics.median(rows) / (statistics.median(cpu) / 1000.0)),
                 "batch_cpu_ms": [t.get("cpu_ms") for t in times]}
        parts = [t["cpu_parts_ms"] for t in steady if t.get("cpu_parts_ms")]
        if parts:
            extra["median_batch_cpu_parts_ms"] = {k: statistics.median(p[k] for p in parts) for k in parts[0]}
    return {
        "batches_measured": len(steady),
        "rows_per_batch": int(statistics.median(rows)),
        "median_batch_ms": med,
        "mean_batch_ms": round(statistics.fmean(ms), 1),
        "min_batch_ms": min(ms),
        "max_batch_ms": max(ms),
        "rows_per_s": round(statistics.median(rows) / (med / 1000.0)) if med else None,
        "rows_per_s_mean": round(sum(rows) / (sum(ms) / 1000.0)) if sum(ms) else None,
        "batch_ms": [t["ms"] for t in times],
        **extra,
    }


def stream_for(partitions: int, keys: int, rows: int, span_ms: int, disorder_ms: int, seed: int = 1,
               **kw: Any) -> SyntheticStream:
    """A stream whose every batch of ``rows`` covers ``span_ms`` of event time."""
    eps = max(1, rows * 1000 // span_ms)
    return SyntheticStream(partitions=partitions, keys=keys, events_per_second=eps, disorder_ms=disorder_ms,
                           seed=seed, start_ms=START_MS, **kw)


def run_child(script: str, argv: list[str], label: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``python script --child ARGV...`` in a fresh process (``env``: its environment, default this
    one's): the ``RESULT {json}`` line it prints. Each engine runs in its own process, so one
    engine's JVM and imports cannot slow the next."""
    print(f"[{label} {time.strftime('%H:%M:%S')}]", file=sys.stderr, flush=True)
    run = subprocess.run([sys.executable, script, "--child", *argv], capture_output=True, text=True, env=env)
    line = [x for x in run.stdout.splitlines() if x.startswith("RESULT ")]
    if run.returncode != 0 or not line:
        raise RuntimeError(f"{label}: {run.stderr[-3000:]}")
    return dict(json.loads(line[0][len("RESULT "):]))
