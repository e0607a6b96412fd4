"""A checkpoint and sinks on S3 (``s3a://``), through a real S3 API server (tests/s3_server.py).

Each engine path (in CI the native and keyed ones: ``S3_PATHS``) runs one pipeline twice,
resuming, with nothing changed but the checkpoint's and the sinks' URIs: once on S3, once on the
local disk. The results and late rows must be the
same, and the S3 run must leave its checkpoint (Spark's and lowwater's) and its sinks' batches as
objects in the bucket, read back with boto3, not through Hadoop. The server's settings make an
``hsync`` on an S3A stream raise (S3A only warns by default, at every call): lowwater wrote its
control-plane files with one, and S3 cannot honour it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import OutputTag, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import EventTimeSessionWindows, TumblingEventTimeWindows
from lowwater.io import PartitionedLogWriter
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sinks import DirectorySink
from lowwater.spark.sources import PartitionedLogSource
from tests.s3_server import S3Server
from tests.spark.real.uri_cli import run_status_and_plot

pytestmark = pytest.mark.spark

FIELDS = [("user", "STRING"), ("ts", "BIGINT"), ("n", "BIGINT")]


def _append(writer: PartitionedLogWriter, lo: int, hi: int) -> None:
    writer.append(0, [{"user": f"u{i % 3}", "ts": 1_000 * i, "n": i} for i in range(lo, hi)])
    writer.append(1, [{"user": f"u{i % 3}", "ts": 1_000 * i + 500, "n": 1} for i in range(lo, hi)])


def _build(path: str, log: Path, out: str) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    stream = env.from_source(PartitionedLogSource(log, FIELDS, max_files_per_trigger=1),
                             WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
    if path == "native":
        windowed = stream.key_by("user").window(TumblingEventTimeWindows.of(10_000))
    elif path == "keyed":  # a Python key selector: per key on the executors, state under the checkpoint
        windowed = stream.key_by(lambda e: e["user"]).window(EventTimeSessionWindows.with_gap(3_000))
    else:  # a count window on the general path (path="general"): the driver steps it, its state sealed snapshots
        windowed = stream.key_by("user").count_window(5)
    if path != "general":
        windowed = windowed.side_output_late_data(late)
    result = windowed.sum("n")
    result.add_sink(DirectorySink(f"{out}/results", "json"))
    if path != "general":
        result.get_side_output(late).add_sink(DirectorySink(f"{out}/late", "json"))
    return env


def _rows(spark: Any, directory: str) -> list[str]:
    """A DirectorySink's rows with their batch, as sorted JSON texts (read as text: a batch with no rows
    is an empty file, which leaves Spark's JSON reader no schema to infer)."""
    from lowwater.spark.fs import checkpoint_fs

    if not checkpoint_fs(directory, spark).exists(directory):
        return []
    return sorted(json.dumps({**json.loads(r.value), "batch": r.batch}, sort_keys=True)
                  for r in spark.read.text(directory).collect() if r.value.strip())


# CI: the native and keyed paths, whose state Spark's executors write in the bucket. The general
# path's snapshots go through the same HadoopFS calls as every path's control-plane files (the batch
# records, the state's JSON versions): LOWWATER_S3_PATHS=all adds it (about 25 s of CI's time).
S3_PATHS = ["native", "keyed", "general"] if os.environ.get("LOWWATER_S3_PATHS") == "all" else ["native", "keyed"]


@pytest.mark.parametrize("path", S3_PATHS)
def test_a_pipeline_on_s3_equals_it_on_the_local_disk(spark: Any, s3: S3Server, tmp_path: Path, path: str) -> None:
    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    _append(writer, 0, 20)
    stores = {"s3": f"{s3.uri}/{path}", "disk": str(tmp_path / "disk")}
    for end in (False, True):
        for store in stores.values():
            SparkRuntime(f"{store}/checkpoint", spark=spark, path=path, trigger="available_now",
                         end_of_input=end).execute(_build(path, log, f"{store}/out"), f"s3-{path}")
        if not end:
            _append(writer, 20, 40)
            writer.append(0, [{"user": "x", "ts": 2_000, "n": 100}])  # a window of its own, behind the watermark: late
    for part in ("results", "late"):
        on_s3, on_disk = (_rows(spark, f"{store}/out/{part}") for store in stores.values())
        assert on_s3 == on_disk, part
    assert len(_rows(spark, f"{stores['s3']}/out/results")) >= 3
    assert len(_rows(spark, f"{stores['s3']}/out/late")) == (0 if path == "general" else 1)
    keys = s3.keys(f"{path}/")
    assert any(k.startswith(f"{path}/checkpoint/spark/commits/") for k in keys)
    assert f"{path}/checkpoint/lowwater/pipeline.json" in keys
    assert f"{path}/checkpoint/lowwater/end_of_input.json" in keys
    assert any(re.match(rf"{path}/out/results/batch=\d+/part-", k) for k in keys)
    assert not any("/." in k or k.endswith(".tmp") for k in keys)  # no temporary file left behind
    # lowwater's own files are written straight to their names: an object appears whole at its
    # close, where a temporary object and a rename (a copy) took about twenty requests a file
    touched = [r for r in s3.requests() if f"/{path}/checkpoint/lowwater/" in r]
    assert touched and not [r for r in touched if ".tmp" in r]


def test_lowwater_run_and_status_on_a_checkpoint_on_s3(
        spark: Any, s3: S3Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI with ``--checkpoint s3a://...`` and a Delta table in the bucket: ``run`` resumes
    there, ``status`` reads the batch records and the end of input from the bucket, ``plot`` draws
    them."""
    out = f"{s3.uri}/cli/totals"
    printed = run_status_and_plot(tmp_path, f"{s3.uri}/cli/checkpoint", f".sink_to(DeltaSink({out!r}))", capsys)
    assert f"next: lowwater status {s3.uri}/cli/checkpoint;" in printed
    results = sorted((r.key, r.value) for r in spark.read.format("delta").load(out).collect())
    assert results == [("u", 2), ("u", 10), ("v", 4), ("v", 20)]
    assert any(k.startswith("cli/totals/_delta_log/") for k in s3.keys("cli/"))


# The seeded SIGKILL series on S3 is not in CI: its one seed takes as long as the HDFS series'
# seed, which CI runs (86 s against 104 s). LOWWATER_S3_CRASH_SEEDS=1 (or 1,2) defines the test.
S3_SEEDS = [int(s) for s in os.environ.get("LOWWATER_S3_CRASH_SEEDS", "").split(",") if s.strip()]

if S3_SEEDS:
    @pytest.mark.parametrize("seed", S3_SEEDS)
    def test_the_crash_series_with_the_checkpoint_on_s3(spark: Any, s3: S3Server, pg: Any, tmp_path_factory: Any,
                                                       seed: int) -> None:
        """The seeded SIGKILL series (tests/spark/crash_series.py) with the whole checkpoint in the
        bucket. Each run of the job is a driver of its own, which reads the bucket's settings from
        ``spark-defaults.conf`` in ``SPARK_CONF_DIR``, as a user's job would."""
        from tests.spark.crash_series import UriSeries

        work = tmp_path_factory.mktemp("s3-crash")
        conf = work / "conf"
        conf.mkdir()
        (conf / "spark-defaults.conf").write_text(
            "".join(f"spark.hadoop.{k} {v}\n" for k, v in s3.hadoop_settings().items()))
        series = UriSeries(work, pg, spark=spark, env={"SPARK_CONF_DIR": str(conf)},
                           base_uri=f"{s3.uri}/seed{seed}")
        record = series.run_seed(seed)
        assert record["ok"], json.dumps(record, indent=1, default=str)
        assert any(k.get("landed") for k in record["kills"]) or record["kills"][0]["kind"] == "time"
        assert any(k.startswith(f"seed{seed}/crash/") for k in s3.keys(f"seed{seed}/"))
