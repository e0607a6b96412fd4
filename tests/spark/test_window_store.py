"""lowwater.spark.window_store: a batch's partials written by Spark under the checkpoint, on a
plain local path (:class:`LocalFS`) and through a ``file:`` URI (Hadoop's file system)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lowwater.spark.fs import HadoopFS, LocalFS, checkpoint_fs
from lowwater.spark.window_store import WindowStore, replace_with_parquet

pytestmark = pytest.mark.spark

SCHEMA = "key STRING, acc BIGINT, n BIGINT"


def _store(spark: Any, tmp_path: Path, uri: bool) -> WindowStore:
    root = tmp_path / "windows"
    location = root.as_uri() if uri else str(root)
    store = WindowStore(location, checkpoint_fs(location, spark))
    assert isinstance(store.fs, HadoopFS if uri else LocalFS)
    return store


def _partials(spark: Any, rows: list[tuple[int, str, int, int]]) -> Any:
    return spark.createDataFrame(rows, "start BIGINT, key STRING, acc BIGINT, n BIGINT")


def _read(spark: Any, store: WindowStore, starts: dict[int, list[int]]) -> list[tuple[Any, ...]]:
    df = store.read(spark, SCHEMA, starts)
    assert df is not None
    return sorted(tuple(r) for r in df.select("start", "key", "acc", "n").collect())


@pytest.mark.parametrize("uri", [False, True], ids=["path", "file-uri"])
def test_a_batch_is_written_by_start_with_no_marker_and_nothing_of_the_committer_left(
        spark: Any, tmp_path: Path, uri: bool) -> None:
    store = _store(spark, tmp_path, uri)
    store.append(_partials(spark, [(0, "a", 5, 1), (0, "b", 7, 2), (60_000, "a", 1, 1)]), 3, tasks=1)
    batch = tmp_path / "windows" / "batch=3"
    assert sorted(p.name for p in batch.iterdir()) == ["start=0", "start=60000"], \
        "no _SUCCESS marker, no _temporary directory"
    # on a local disk, plain path or file: URI, Hadoop's file system without checksums: no .crc (nor chmod) per file
    assert not list(batch.rglob("*.crc")), sorted(p.name for p in batch.rglob("*"))
    assert _read(spark, store, {0: [3], 60_000: [3]}) == [(0, "a", 5, 1), (0, "b", 7, 2), (60_000, "a", 1, 1)]


@pytest.mark.parametrize("uri", [False, True], ids=["path", "file-uri"])
def test_a_replayed_batch_replaces_what_an_interrupted_attempt_left(spark: Any, tmp_path: Path, uri: bool) -> None:
    """An attempt that died mid-write left a start's file and the committer's temporary files;
    the replay's write leaves exactly its own rows (no duplicate, no stale start)."""
    store = _store(spark, tmp_path, uri)
    store.append(_partials(spark, [(0, "a", 5, 1), (120_000, "z", 9, 9)]), 4, tasks=1)
    batch = tmp_path / "windows" / "batch=4"
    (batch / "_temporary" / "0" / "_temporary" / "attempt_x").mkdir(parents=True)
    (batch / "_temporary" / "0" / "_temporary" / "attempt_x" / "part-0.parquet").write_bytes(b"half a file")
    store.append(_partials(spark, [(0, "a", 5, 1), (0, "b", 7, 2)]), 4, tasks=1)
    assert sorted(p.name for p in batch.iterdir()) == ["start=0"]
    assert _read(spark, store, {0: [4]}) == [(0, "a", 5, 1), (0, "b", 7, 2)]


@pytest.mark.parametrize("uri", [False, True], ids=["path", "file-uri"])
def test_replace_with_parquet_leaves_exactly_the_new_rows_and_no_marker(spark: Any, tmp_path: Path, uri: bool) -> None:
    """The keyed path's state directory (no partitioning): what was there, a finished write's
    files and a dead attempt's, is replaced by the new rows alone."""
    out = tmp_path / "keyed" / "batch=7"
    location = (tmp_path / "keyed").as_uri() + "/batch=7" if uri else str(out)  # as_uri() would quote the "="
    fs = checkpoint_fs(location, spark)
    replace_with_parquet(spark.createDataFrame([("old", 1)], "k STRING, v BIGINT"), location, fs)
    (out / "_temporary" / "0" / "_temporary" / "attempt_x").mkdir(parents=True, exist_ok=True)
    (out / "_temporary" / "0" / "_temporary" / "attempt_x" / "part-0.parquet").write_bytes(b"half a file")
    replace_with_parquet(spark.createDataFrame([("a", 1), ("b", 2)], "k STRING, v BIGINT"), location, fs)
    names = sorted(p.name for p in out.iterdir())
    assert names and all(n.startswith("part-") or n.startswith(".part-") for n in names), names
    assert sorted(tuple(r) for r in spark.read.parquet(location).collect()) == [("a", 1), ("b", 2)]


def test_a_plain_path_on_spark_s_local_default_stays_a_local_directory(spark: Any, tmp_path: Path) -> None:
    from lowwater.spark.fs import resolve

    assert resolve(str(tmp_path / "ck"), spark) == str(tmp_path / "ck")  # LocalFS, as before
    assert resolve("relative/ck", spark) == "relative/ck"
    assert resolve(f"file://{tmp_path}/ck", spark) == f"file://{tmp_path}/ck"
    assert resolve("/ck", None) == "/ck"  # no driver JVM to ask (Spark Connect): a local path
    spark.conf.set("fs.defaultFS", "hdfs://127.0.0.1:9")
    try:  # qualified without a connection, as Hadoop does; relative paths under the working directory
        assert resolve("/jobs/ck", spark) == "hdfs://127.0.0.1:9/jobs/ck"
        assert resolve("ck", spark).startswith("hdfs://127.0.0.1:9/user/")
    finally:
        spark.conf.unset("fs.defaultFS")


_MANY_STARTS = """
from lowwater.spark.fs import checkpoint_fs
from lowwater.spark.session import get_or_create_session
from lowwater.spark.window_store import WindowStore

spark = get_or_create_session()
store = WindowStore({root!r}, checkpoint_fs({root!r}, spark))
rows = [(start * 10_000, "a", 1, 1) for start in range(16)]
store.append(spark.createDataFrame(rows, "start BIGINT, key STRING, acc BIGINT, n BIGINT"), 0, tasks=1)
print(store.read(spark, "key STRING, acc BIGINT, n BIGINT", {{r[0]: [0] for r in rows}}).count())
"""


def test_a_task_writing_many_starts_stays_within_parquets_memory_pool(tmp_path: Path) -> None:
    """A task keeps a Parquet writer open per start (CONCURRENT_WRITERS), and each reserved Parquet's
    default 128 MB row group: past 7 of them a 1 GB heap's pool was full, and Parquet's MemoryManager
    warned at every writer it opened (156 lines in one ``lowwater demo``). Its notice is off in
    lowwater's logging (spark/log4j2.properties): smaller row groups cost a fifth of a batch's CPU.
    In a process of its own: the JVM's log goes to the stderr it was started with."""
    import os
    import subprocess
    import sys

    from tests.spark.crash_series import JVM_OPTIONS

    script = tmp_path / "many_starts.py"
    script.write_text(_MANY_STARTS.format(root=str(tmp_path / "windows")))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable, "JDK_JAVA_OPTIONS": JVM_OPTIONS})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "16"
    assert "MemoryManager" not in done.stderr, done.stderr[-3000:]
