"""A pipeline on Spark writing to a real PostgreSQL server: re-firings replace, replays change nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lowwater.api import StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sinks import PostgresSink
from lowwater.spark.sinks.postgres import execute_statements
from lowwater.spark.sources import BatchFilesSource

pytestmark = pytest.mark.spark


def _table(spark: Any, pg: Any, table: str) -> list[tuple[Any, ...]]:
    rows = (spark.read.format("jdbc").option("url", pg.jdbc_url).option("dbtable", table)
            .option("user", pg.user).option("driver", "org.postgresql.Driver").load().collect())
    return sorted((r["key"], r["window_start"], r["value"], r["fire_index"]) for r in rows)


def test_refirings_upsert_and_a_replayed_batch_changes_nothing(spark: Any, pg: Any, tmp_path: Path) -> None:
    batches = [
        [{"key": "a", "ts": 1000, "value": 1}, {"key": "b", "ts": 2000, "value": 2}],
        [{"key": "a", "ts": 12000, "value": 4}],                                  # closes [0, 10 s)
        [{"key": "a", "ts": 3000, "value": 8}, {"key": "a", "ts": 4000, "value": 16}],  # two re-firings
    ]
    BatchFilesSource.write(tmp_path / "in", batches)
    fields = BatchFilesSource.infer_fields(batches)

    def run(checkpoint: Path, end_of_input: bool = True) -> Any:
        env = StreamExecutionEnvironment()
        (env.from_source(BatchFilesSource(tmp_path / "in", fields, [0]),
                         WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
         .key_by("key").window(TumblingEventTimeWindows.of(10_000)).allowed_lateness("10 s").sum("value")
         .add_sink(PostgresSink(pg.jdbc_url, "window_totals", user=pg.user)))
        return SparkRuntime(str(checkpoint), spark=spark, end_of_input=end_of_input).execute(env)

    job = run(tmp_path / "ck", end_of_input=False)
    expected = [("a", 0, 25.0, 2), ("a", 10_000, 4.0, 0), ("b", 0, 2.0, 0)]
    assert _table(spark, pg, "window_totals") == [expected[0], expected[2]], "[10 s, 20 s) is still open"

    # a crash after the sinks but before Spark's commit (so before any end of input): Spark replays
    # the batch with the same offsets, then the run ends the input
    last = max(b["batch_id"] for b in job.batches() if not b.get("end_of_input"))
    commits = tmp_path / "ck" / "spark" / "commits"
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    again = run(tmp_path / "ck")
    assert again.batches()[last]["metrics"]["windows_fired"] == 2, "batch replayed"
    assert _table(spark, pg, "window_totals") == expected
    execute_statements(spark, pg.jdbc_url, ["DROP TABLE window_totals"], pg.user, None)
