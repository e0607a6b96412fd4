"""A job for the crash tests: a partitioned log -> windows -> directory sinks (and PostgreSQL), on Spark.

    python crash_job.py LOG CHECKPOINT OUT [native|executor|keyed|general] [--sessions]
                        [--jdbc-url URL --table NAME [--user USER]]

Tumbling 2 s windows, or with ``--sessions`` session windows with a 1 s gap (on the keyed path,
these run in columns: ``lowwater.spark.keyed_sessions``). Window results go to ``OUT/results`` (a
DirectorySink) and, with ``--jdbc-url``, to a PostgresSink on ``--table``, in that order; late
records go to ``OUT/late`` (a DirectorySink).
Set ``LOWWATER_FAULT=<batch>:<point>[,...]`` to have the driver SIGKILLed there
(see :mod:`lowwater.spark.faults`).
"""

from __future__ import annotations

import argparse

from lowwater.api import OutputTag, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import EventTimeSessionWindows, TumblingEventTimeWindows
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sinks import DirectorySink, PostgresSink
from lowwater.spark.sources import PartitionedLogSource

FIELDS = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]


def build(env: StreamExecutionEnvironment, log: str, out: str, postgres: PostgresSink | None = None,
          sessions: bool = False) -> None:
    late = OutputTag("late")
    result = (
        env.from_source(
            PartitionedLogSource(log, FIELDS, max_files_per_trigger=2),
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
    parser.add_argument("--jdbc-url")
    parser.add_argument("--table")
    parser.add_argument("--user")
    args = parser.parse_args(argv)

    spark = None
    postgres = None
    if args.jdbc_url:
        from lowwater.spark.session import get_or_create_session, postgres_jdbc_jar

        jar = postgres_jdbc_jar()
        if jar is None:
            raise SystemExit("the PostgreSQL JDBC driver jar is missing: run bash scripts/ensure_postgres.sh")
        spark = get_or_create_session(app_name="lowwater crash job", jars=[jar])
        postgres = PostgresSink(args.jdbc_url, args.table or "crash_results", user=args.user)
    env = StreamExecutionEnvironment()
    build(env, args.log, args.out, postgres, sessions=args.sessions)
    runtime = SparkRuntime(args.checkpoint, spark=spark, path=args.path, clock=lambda b: 1_000 * b,
                           end_of_input=True)
    runtime.execute(env, "crash test")


if __name__ == "__main__":
    main()
