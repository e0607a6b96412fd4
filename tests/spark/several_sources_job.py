"""A job for the several-source tests: two partitioned logs, united or connected, on Spark.

    python several_sources_job.py CLICKS ORDERS CHECKPOINT OUT [union|connect] [auto|keyed|general] [--frames]

``union``: both sources -> key_by(key) -> tumbling 2 s windows, sum, late side output, to
``OUT/results`` and ``OUT/late`` (DirectorySinks). ``connect``: a KeyedCoProcessFunction
that counts elements per key and reports the count at a timer 1 s after each element, to
``OUT/results``. With ``--frames``, CLICKS and ORDERS are ``crash_job.write_frames``' folders of
Parquet files, each read by Spark's file source two files a batch through a ``DataFrameSource``
(as the partitioned log's source reads two segments a batch; a driver without a Python data
source starts several seconds sooner). Set ``LOWWATER_FAULT=<batch>:<point>[,...]`` to have the driver
SIGKILLed there (see :mod:`lowwater.spark.faults`).
"""

from __future__ import annotations

import sys
from typing import Any

from lowwater.api import KeyedCoProcessFunction, OutputTag, StreamExecutionEnvironment, ValueStateDescriptor
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sinks import DirectorySink
from lowwater.spark.sources import PartitionedLogSource

FIELDS = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]


class CountAtTimers(KeyedCoProcessFunction):
    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def _add(self, value: Any, ctx: Any) -> Any:
        self.count.update((self.count.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1000)
        return None

    def process_element1(self, value: Any, ctx: Any) -> Any:
        return self._add(value, ctx)

    def process_element2(self, value: Any, ctx: Any) -> Any:
        return self._add(value, ctx)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield {"key": ctx.get_current_key(), "timer": timestamp, "count": self.count.value(),
               "watermark": ctx.timer_service().current_watermark()}


def build(env: StreamExecutionEnvironment, clicks: str, orders: str, out: str, topology: str,
          spark: Any = None) -> None:
    """The job; given ``spark``, ``clicks`` and ``orders`` are write_frames' folders (DataFrameSources)."""

    def source(log: str) -> Any:
        if spark is None:
            return PartitionedLogSource(log, FIELDS, max_files_per_trigger=2)
        try:
            from tests.spark.crash_job import frames_source
        except ImportError:  # run as a script: tests/spark on sys.path
            from crash_job import frames_source  # type: ignore[no-redef]
        return frames_source(spark, log, 2)

    a = env.from_source(source(clicks),
                        WatermarkStrategy.for_bounded_out_of_orderness(500).with_timestamp_assigner("ts"),
                        name="clicks")
    b = env.from_source(source(orders),
                        WatermarkStrategy.for_bounded_out_of_orderness(200).with_timestamp_assigner("ts"),
                        name="orders")
    if topology == "connect":
        a.connect(b).key_by("key", "key").process(CountAtTimers()).add_sink(DirectorySink(f"{out}/results", "jsonl"))
        return
    late = OutputTag("late")
    result = (a.union(b).key_by("key").window(TumblingEventTimeWindows.of(2000)).allowed_lateness(500)
              .side_output_late_data(late).sum("value"))
    result.add_sink(DirectorySink(f"{out}/results", "jsonl"))
    result.get_side_output(late).add_sink(DirectorySink(f"{out}/late", "jsonl"))


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--frames"]
    frames = "--frames" in sys.argv[1:]
    clicks, orders, checkpoint, out = args[:4]
    topology = args[4] if len(args) > 4 else "union"
    path = args[5] if len(args) > 5 else "auto"
    spark = None
    if frames:
        from lowwater.spark.session import get_or_create_session

        spark = get_or_create_session(app_name="lowwater several sources job")
    env = StreamExecutionEnvironment()
    build(env, clicks, orders, out, topology, spark=spark)
    SparkRuntime(checkpoint, spark=spark, path=path, clock=lambda b: 1_000 * b,  # type: ignore[arg-type]
                 end_of_input=True).execute(env, "several sources")


if __name__ == "__main__":
    main()
