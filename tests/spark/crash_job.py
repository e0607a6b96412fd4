"""A job for the crash tests: a partitioned log -> windows -> directory sinks, on Spark.

    python crash_job.py LOG CHECKPOINT OUT [native|general]

Set ``LOWWATER_FAULT=<batch>:<point>`` to have the driver SIGKILLed there.
"""

from __future__ import annotations

import sys

from lowwater.api import OutputTag, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sinks import DirectorySink
from lowwater.spark.sources import PartitionedLogSource

FIELDS = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]


def build(env: StreamExecutionEnvironment, log: str, out: str) -> None:
    late = OutputTag("late")
    result = (
        env.from_source(
            PartitionedLogSource(log, FIELDS, max_files_per_trigger=2),
            WatermarkStrategy.for_bounded_out_of_orderness(500).with_timestamp_assigner("ts"),
        )
        .key_by("key")
        .window(TumblingEventTimeWindows.of(2000))
        .allowed_lateness(1000)
        .side_output_late_data(late)
        .sum("value")
    )
    result.add_sink(DirectorySink(f"{out}/results", "jsonl"))
    result.get_side_output(late).add_sink(DirectorySink(f"{out}/late", "jsonl"))


def main(log: str, checkpoint: str, out: str, path: str = "native") -> None:
    env = StreamExecutionEnvironment()
    build(env, log, out)
    SparkRuntime(checkpoint, path=path, clock=lambda b: 1_000 * b).execute(env, "crash test")  # type: ignore[arg-type]


if __name__ == "__main__":
    main(*sys.argv[1:])
