"""A job for the crash tests: a partitioned log -> windows -> directory sinks (and PostgreSQL), on Spark.

    python crash_job.py LOG CHECKPOINT OUT [native|executor|keyed|general] [--sessions | --both] [--frames]
                        [--jdbc-url URL --table NAME [--user USER]]

Tumbling 2 s windows, or with ``--sessions`` session windows with a 1 s gap (on the keyed path,
these run in columns: ``lowwater.spark.keyed_sessions``). Window results go to ``OUT/results`` (a
DirectorySink) and, with ``--jdbc-url``, to a PostgresSink on ``--table``, in that order; late
records go to ``OUT/late`` (a DirectorySink). With ``--both``, the tumbling windows and the sessions
run at once, as two streaming queries of this driver, under ``CHECKPOINT/<shape>`` and
``OUT/<shape>`` (:data:`SHAPES`); with ``LOWWATER_FAULT_QUERIES=2`` a fault kills the driver once
both have reached it.

The input is the partitioned log at LOG (a ``PartitionedLogSource``, two segments a batch), or
with ``--frames`` the Parquet files :func:`write_frames` made of it in LOG, read by Spark's file
source three files a batch (one segment of each partition) through a ``DataFrameSource``: a
driver without a Python data source starts several seconds sooner (the fixed-point crash tests
of ``test_engine.py`` take it; the seeded series keep the log).
Set ``LOWWATER_FAULT=<batch>:<point>[,...]`` to have the driver SIGKILLed there
(see :mod:`lowwater.spark.faults`).
"""

from __future__ import annotations

import argparse
import json
import os
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from lowwater.api import OutputTag, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import EventTimeSessionWindows, TumblingEventTimeWindows
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sinks import DirectorySink, PostgresSink
from lowwater.spark.sources import PartitionedLogSource

FIELDS = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]
SHAPES = {"tumbling": False, "sessions": True}
"""``--both``'s pipelines: each one's name (its folder, and its query's) and whether it has sessions."""


FRAME_SCHEMA = "partition INT, offset BIGINT, key STRING, ts BIGINT, value BIGINT"


def write_frames(log: Path, folder: Path) -> int:
    """Write the partitioned log at ``log`` (JSON lines) as Parquet files in ``folder``: one per
    segment, in the order segment 0 of each partition, then segment 1, ..., their modification
    times one second apart in that order (Spark's file source takes files by modification time).
    Returns the number of files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    segments = {int(d.name.split("=")[1]): sorted(d.glob("segment-*.jsonl")) for d in log.glob("partition=*")}
    folder.mkdir(parents=True, exist_ok=True)
    n = 0
    for i in range(max(len(v) for v in segments.values())):
        for p in sorted(segments):
            if i >= len(segments[p]):
                continue
            rows = [json.loads(line) for line in segments[p][i].read_text().splitlines()]
            table = pa.table({"partition": pa.array([r["partition"] for r in rows], pa.int32()),
                              "offset": pa.array([r["offset"] for r in rows], pa.int64()),
                              **{f: [r["value"][f] for r in rows] for f in ("key", "ts", "value")}})
            target = folder / f"part-{n:05d}.parquet"
            pq.write_table(table, target)
            os.utime(target, (1_700_000_000 + n, 1_700_000_000 + n))
            n += 1
    return n


def frames_source(spark: Any, folder: str, files_per_batch: int) -> Any:
    """A ``DataFrameSource`` over :func:`write_frames`' ``folder``, read by Spark's file source
    ``files_per_batch`` files a batch."""
    from lowwater.spark.dataframe_source import DataFrameSource

    frames = spark.readStream.schema(FRAME_SCHEMA).option("maxFilesPerTrigger", files_per_batch).parquet(folder)
    return DataFrameSource(frames, partition="partition", offset="offset")


def build(env: StreamExecutionEnvironment, log: str, out: str, postgres: PostgresSink | None = None,
          sessions: bool = False, spark: Any = None) -> None:
    """The job; given ``spark``, ``log`` is :func:`write_frames`' folder, read through a DataFrameSource."""
    late = OutputTag("late")
    source: Any = frames_source(spark, log, 3) if spark is not None else PartitionedLogSource(
        log, FIELDS, max_files_per_trigger=2)
    result = (
        env.from_source(
            source,
            WatermarkStrategy.for_bounded_out_of_orderness(500).with_timestamp_assigner("ts"),
        )
        .key_by("key")
        .window(EventTimeSessionWindows.with_gap(1000) if sessions else TumblingEventTimeWindows.of(2000))
        .allowed_lateness(1000)
        .side_output_late_data(late)
        .sum("value")
    )
    result.add_sink(DirectorySink(f"{out}/results", "jsonl"))
    if postgres is not None:
        result.add_sink(postgres)
    result.get_side_output(late).add_sink(DirectorySink(f"{out}/late", "jsonl"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log")
    parser.add_argument("checkpoint")
    parser.add_argument("out")
    parser.add_argument("path", nargs="?", default="native", choices=["native", "executor", "keyed", "general"])
    parser.add_argument("--sessions", action="store_true")
    parser.add_argument("--both", action="store_true", help="both shapes, two queries at once")
    parser.add_argument("--frames", action="store_true", help="LOG is write_frames' folder of Parquet files")
    parser.add_argument("--jdbc-url")
    parser.add_argument("--table")
    parser.add_argument("--user")
    args = parser.parse_args(argv)
    if args.both and (args.sessions or args.jdbc_url):
        parser.error("--both runs both shapes, into directory sinks only")

    from lowwater.spark.session import get_or_create_session

    spark = None
    postgres = None
    if args.jdbc_url:
        from lowwater.spark.session import postgres_jdbc_jar

        jar = postgres_jdbc_jar()
        if jar is None:
            raise SystemExit("the PostgreSQL JDBC driver jar is missing: run bash scripts/ensure_postgres.sh")
        spark = get_or_create_session(app_name="lowwater crash job", jars=[jar])
        postgres = PostgresSink(args.jdbc_url, args.table or "crash_results", user=args.user)
    if (args.frames or args.both) and spark is None:  # one session for both queries, made before either
        spark = get_or_create_session(app_name="lowwater crash job")

    def run(checkpoint: str, out: str, sessions: bool, name: str) -> None:
        env = StreamExecutionEnvironment()
        build(env, args.log, out, postgres, sessions=sessions, spark=spark if args.frames else None)
        SparkRuntime(checkpoint, spark=spark, path=args.path, clock=lambda b: 1_000 * b,
                     end_of_input=True).execute(env, name)

    if not args.both:
        run(args.checkpoint, args.out, args.sessions, "crash test")
        return
    pool = ThreadPoolExecutor(len(SHAPES))
    runs = [pool.submit(run, f"{args.checkpoint}/{shape}", f"{args.out}/{shape}", sessions, f"crash test {shape}")
            for shape, sessions in SHAPES.items()]
    for done in as_completed(runs):
        if done.exception() is not None:  # not waiting for the other query, which may wait at a fault
            traceback.print_exception(done.exception())
            os._exit(1)
    pool.shutdown()


if __name__ == "__main__":
    main()
