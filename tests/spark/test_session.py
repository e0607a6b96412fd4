"""The user's Spark configuration wins over lowwater's defaults (issue 9, item 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lowwater.spark.session import get_or_create_session

pytestmark = pytest.mark.spark

_PROBE = """
from lowwater.spark.session import get_or_create_session
spark = get_or_create_session(app_name="probe")
conf = spark.sparkContext.getConf()
print("MASTER", spark.sparkContext.master)
print("PARTITIONS", spark.conf.get("spark.sql.shuffle.partitions"))
print("TIMEZONE", spark.conf.get("spark.sql.session.timeZone"))
print("UI", conf.get("spark.ui.enabled", "default"))
print("DELTA", conf.get("spark.databricks.delta.snapshotPartitions", "unset"))
spark.stop()
"""


def test_spark_submit_keeps_its_master_and_its_conf_and_lowwater_fills_the_rest(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(_PROBE)
    submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("LOWWATER_SPARK_MASTER", None)
    out = subprocess.run(
        [str(submit), "--master", "local[1]", "--conf", "spark.sql.shuffle.partitions=7",
         "--conf", "spark.ui.enabled=false", str(probe)],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert lines["MASTER"] == "local[1]", "spark-submit's --master, not lowwater's local[*]"
    assert lines["PARTITIONS"] == "7", "spark-submit's --conf wins"
    assert lines["TIMEZONE"] == "UTC", "lowwater's default fills what spark-submit left out"
    assert lines["UI"] == "false"
    assert lines["DELTA"] == "4", "a local master reads a Delta table's state in as many tasks as it shuffles"


def test_an_active_session_is_returned_as_it_is(spark: Any) -> None:
    before = spark.conf.get("spark.sql.shuffle.partitions")
    same = get_or_create_session(conf={"spark.sql.shuffle.partitions": str(int(before) + 13)})
    assert same is spark
    assert same.conf.get("spark.sql.shuffle.partitions") == before


def test_a_local_session_reads_a_delta_tables_state_in_as_many_tasks_as_it_shuffles(spark: Any) -> None:
    """Delta's 50 tasks for a table's state, each generating its projection code again, made the
    Delta sink's tests on a local master take 1.5 times as long (docs/cluster.md)."""
    assert spark.conf.get("spark.databricks.delta.snapshotPartitions") == "4"
    assert spark.conf.get("spark.sql.extensions") == "io.delta.sql.DeltaSparkSessionExtension"
