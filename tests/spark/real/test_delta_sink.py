"""DeltaSink on a real Delta table (delta-spark from pom.xml): idempotent by (txnAppId, batch id)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lowwater.core.windows.events import WindowResult
from lowwater.spark.sinks.delta import DeltaSink

pytestmark = pytest.mark.spark


def _table(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    rows = spark.read.format("delta").load(str(path)).collect()
    return sorted((r.key, r.window_start, r.value, r.fire_index, r.batch_id) for r in rows)


def test_a_replayed_batch_adds_nothing_and_a_new_one_appends(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "totals"
    sink = DeltaSink(str(table))
    first = [WindowResult("ann", 0, 10, 3, 0), WindowResult("bob", 0, 10, 5, 0)]
    sink.write_batch(0, first)
    sink.write_batch(0, first)  # a replay after a crash between Delta's commit and the job's
    assert _table(spark, table) == [("ann", 0, 3.0, 0, 0), ("bob", 0, 5.0, 0, 0)]

    sink.write_batch(1, [WindowResult("ann", 0, 10, 4, 1)])  # a re-firing is a new row
    again = DeltaSink(str(table))  # a restarted job: a new sink object, the same app id
    assert again.app_id == sink.app_id
    again.write_batch(1, [WindowResult("ann", 0, 10, 999, 1)])  # an older version: skipped
    assert _table(spark, table) == [("ann", 0, 3.0, 0, 0), ("ann", 0, 4.0, 1, 1), ("bob", 0, 5.0, 0, 0)]

    other = DeltaSink(str(table), name="late")  # another writer of the table has its own versions
    assert other.app_id != sink.app_id
    other.write_dataframe(spark.createDataFrame([("cat", 0, 10, 1.0, 0)], "key STRING, window_start BIGINT, "
                                                "window_end BIGINT, value DOUBLE, fire_index INT"), 1)
    assert ("cat", 0, 1.0, 0, 1) in _table(spark, table)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    assert len(history) == 3  # batch 0, batch 1, the other writer's batch 1: no commit for the replays
