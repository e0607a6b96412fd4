"""Observability end to end on real Spark: the metrics log, Spark's progress joined with it,
``lowwater status`` and ``lowwater plot`` on the checkpoint of a job that just ran."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import CollectSink, OutputTag, StreamExecutionEnvironment
from lowwater.cli import main
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.io import PartitionedLogWriter
from lowwater.observe import plot_watermarks
from lowwater.observe.metrics import MetricsLog, read_checkpoint
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.listener import LowwaterProgressListener

pytestmark = pytest.mark.spark

FIELDS = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]
T0 = 1_700_000_000_000


def _write_log(root: Path) -> int:
    """Three micro-batches of two partitions; partition 1 runs 8 s behind, and batch 2 brings
    one element of partition 0 that is late (its window closed after batch 1)."""
    writer = PartitionedLogWriter(root, "jsonl")
    batches = [
        {0: [("a", 1_000), ("b", 4_000), ("a", 12_000)], 1: [("a", 2_000)]},
        {0: [("a", 21_000), ("b", 25_000)], 1: [("b", 9_000), ("a", 14_000)]},
        {0: [("b", 3_000), ("a", 33_000)], 1: [("a", 24_000)]},
    ]
    n = 0
    for batch in batches:
        for p, events in batch.items():
            writer.append(p, [{"key": k, "ts": T0 + ts, "value": 1} for k, ts in events])
            n += len(events)
    segments = sorted(root.glob("partition=*/segment-*.jsonl"),
                      key=lambda f: (int(f.stem.split("-")[1]), int(f.parent.name.split("=")[1])))
    for i, f in enumerate(segments):  # Spark reads new files oldest first: micro-batch i = batch i
        os.utime(f, (1_000_000 + i, 1_000_000 + i))
    return n


def test_a_spark_job_logs_one_metrics_line_per_batch_that_status_progress_and_plot_show(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from lowwater.spark.sources import PartitionedLogSource

    events = _write_log(tmp_path / "log")
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    counts = (
        env.from_source(PartitionedLogSource(tmp_path / "log", FIELDS, max_files_per_trigger=2),
                        WatermarkStrategy.for_bounded_out_of_orderness(1_000).with_timestamp_assigner("ts"))
        .key_by("key").window(TumblingEventTimeWindows.of(10_000)).side_output_late_data(late).count()
    )
    results, lates = counts.collect(), CollectSink()
    counts.get_side_output(late).add_sink(lates)
    ck = tmp_path / "ck"
    progress: list[dict[str, Any]] = []
    monkeypatch.setattr("lowwater.spark.listener.RECENT_EVENTS", 2)
    listener = LowwaterProgressListener(ck, query_name="observe", on_progress=progress.append)
    spark.streams.addListener(listener)
    try:
        job = SparkRuntime(str(ck), spark=spark, clock=lambda b: T0 + 5_000 * b,
                           end_of_input=True).execute(env, "observe")
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()  # progress events are delivered async
    finally:
        spark.streams.removeListener(listener)

    # the log: one line per batch (3 micro-batches and the end of input), consistent with the sinks
    lines = read_checkpoint(ck)
    assert job.metrics() == lines
    assert [x["batch_id"] for x in MetricsLog(ck).raw_lines()] == [0, 1, 2, 3]
    assert [x["batch_id"] for x in lines] == [r["batch_id"] for r in job.batches()] == [0, 1, 2, 3]
    assert [x["end_of_input"] for x in lines] == [False, False, False, True]
    assert sum(x["rows_in"] for x in lines) == events
    assert sum(x["rows_late"] for x in lines) == len(lates.results) == 1
    assert lines[2]["rows_late_by_partition"] == {"0": 1}
    assert sum(x["windows_fired"] for x in lines) == len(results.results)
    assert [x["combined_watermark"] for x in lines] == [T0 + 999, T0 + 12_999, T0 + 22_999, 2**63 - 1]
    assert lines[1]["partition_watermarks"] == {"0": T0 + 23_999, "1": T0 + 12_999}
    assert [x["watermark_before"] for x in lines[1:3]] == [lines[0]["combined_watermark"],
                                                           lines[1]["combined_watermark"]]
    assert all(x["state_bytes"] > 0 and x["duration_ms"] >= 0 for x in lines)

    # Spark's progress per micro-batch, joined with lowwater's line for the same batch
    assert [e["batch_id"] for e in progress] == [0, 1, 2]
    assert all(e["lowwater"] == lines[e["batch_id"]] for e in progress)
    # a job's listener lives for weeks: it keeps the last RECENT_EVENTS events and no joined line,
    # and a listener made on a checkpoint with batches reads none of them (it read the whole log)
    assert [e["batch_id"] for e in listener.events] == [1, 2]
    assert listener.lines == {}
    later = LowwaterProgressListener(ck)
    assert later._line(0) is None and later.lines == {}
    # Spark counts source rows once per action on the batch; a batch with late rows reads its input
    # again to collect them, so Spark's numInputRows can exceed the rows lowwater received
    # (and the first batch of a run holds the run's one tick row, from the tick source)
    spark_rows = [e["spark"]["numInputRows"] for e in progress]
    assert [x["rows_in"] for x in lines[:2]] == [4, 4] and spark_rows[:2] == [4 + 1, 4]
    assert spark_rows[2] >= lines[2]["rows_in"] == 3
    assert [p["lowwater"] for p in job.progress()] == lines[:3]

    # lowwater status and lowwater plot on the checkpoint
    capsys.readouterr()
    assert main(["status", str(ck), "--batches", "4"]) == 0
    out = capsys.readouterr().out
    assert "4 batches (0..3), end of input reached" in out
    assert f"totals: {events} rows in, 1 late" in out
    assert "watermarks after batch 2" in out
    assert "  combined   2023-11-14 22:13:42.999" in out
    picture = tmp_path / "watermarks.png"
    assert main(["plot", str(ck), "-o", str(picture)]) == 0
    assert "3 batches and the end of input, 2 partitions, 1 late rows" in capsys.readouterr().out
    assert picture.read_bytes()[:4] == b"\x89PNG" and picture.stat().st_size > 10_000
    data = plot_watermarks(lines, tmp_path / "again.png")
    assert data["combined"] == [(x["combined_watermark"] - data["origin_ms"]) / 1000 for x in lines[:3]]
    assert data["late"] == [(10.0, (lines[1]["combined_watermark"] - data["origin_ms"]) / 1000, 1)]



def test_the_progress_listener_joins_a_uri_checkpoints_batches_through_on_metrics(spark: Any, tmp_path: Path,
                                                                                  monkeypatch: Any) -> None:
    """A checkpoint on a URI has no metrics.jsonl for the listener to read: every event came with
    ``"lowwater": None``. Fed by the engine (``on_metrics=listener.record``) it joins them.

    The events reach the listener without a Java exception: PySpark's own listener read each map
    of the progress through a Java iterator, whose end is an exception that PySpark's conversion
    checks against 14 classes through py4j (about 166 ms of the JVM's CPU per event)."""
    import pyspark.errors.exceptions.captured as captured

    from lowwater.spark.sources import PartitionedLogSource

    converted: list[str] = []
    convert = captured.convert_exception

    def counted(e: Any) -> Any:
        converted.append(str(e)[:200])
        return convert(e)

    monkeypatch.setattr(captured, "convert_exception", counted)

    _write_log(tmp_path / "log")
    env = StreamExecutionEnvironment()
    (env.from_source(PartitionedLogSource(tmp_path / "log", FIELDS, max_files_per_trigger=2),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").window(TumblingEventTimeWindows.of(10_000)).sum("value").collect())
    ck = (tmp_path / "ck").as_uri()
    progress: list[dict[str, Any]] = []
    listener = LowwaterProgressListener(ck, query_name="uri", on_progress=progress.append)
    spark.streams.addListener(listener)
    try:
        job = SparkRuntime(ck, spark=spark, clock=lambda b: T0 + 5_000 * b, on_metrics=listener.record,
                           end_of_input=True).execute(env, "uri")
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    finally:
        spark.streams.removeListener(listener)
    lines = job.metrics()
    assert [e["batch_id"] for e in progress] == [0, 1, 2]
    assert [e["lowwater"] for e in progress] == lines[:3]
    assert [e["spark"]["numInputRows"] for e in progress][1:] == [x["rows_in"] for x in lines[1:3]]
    assert all(e["spark"]["name"] == "uri" and e["spark"]["durationMs"]["triggerExecution"] >= 0 for e in progress)
    assert converted == []
    assert not (tmp_path / "ck" / "lowwater" / "metrics.jsonl").exists()


def test_a_uri_checkpoints_status_counts_the_batches_whose_records_were_deleted(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A URI checkpoint keeps the newest KEEP_BATCH_RECORDS batch records and no metrics.jsonl:
    status counted those batches alone, so a job past 1,000 batches showed a part of its totals."""
    from lowwater.cli import main
    from lowwater.spark.sources import PartitionedLogSource

    monkeypatch.setattr("lowwater.spark.engine.KEEP_BATCH_RECORDS", 2)
    n = _write_log(tmp_path / "log")
    env = StreamExecutionEnvironment()
    (env.from_source(PartitionedLogSource(tmp_path / "log", FIELDS, max_files_per_trigger=2),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").window(TumblingEventTimeWindows.of(10_000)).count().collect())
    ck = (tmp_path / "ck").as_uri()
    job = SparkRuntime(ck, spark=spark, clock=lambda b: T0 + 5_000 * b, end_of_input=True).execute(env, "kept")
    assert sorted(int(r["batch_id"]) for r in job.store.batch_records()) == [2, 3]
    lines = job.metrics()
    assert (lines[0]["folded_from"], lines[0]["batch_id"]) == (0, 1)
    assert sum(x["rows_in"] for x in lines) == n
    assert main(["status", ck]) == 0
    out = capsys.readouterr().out
    assert "4 batches (0..3)" in out and f"{n} rows in = " in out, out


class _PeekThenWrite:
    """A function sink that reads one row first (a first action over part of the frame), then
    writes all of it: its count must not come from the first action."""

    def __init__(self, out: Path) -> None:
        self.out = out

    def __call__(self, df: Any, batch_id: int) -> None:
        df.limit(1).collect()
        df.write.mode("overwrite").parquet(str(self.out / f"batch={batch_id}"))


class _SkipsEveryOther:
    """Says it reads every row, but writes only even batches (as a Delta sink skips a replayed
    batch): the batches it skips are counted apart."""

    reads_every_row = True

    def __init__(self, out: Path) -> None:
        self.out = out

    def write(self, df: Any, batch_id: int) -> None:
        if batch_id % 2 == 0:
            df.write.mode("overwrite").parquet(str(self.out / f"batch={batch_id}"))


@pytest.mark.parametrize("sink_kind", ["directory", "peek", "skips"])
def test_windows_fired_counts_the_results_whatever_the_sink_reads(spark: Any, tmp_path: Path, sink_kind: str
                                                                  ) -> None:
    """The native path counts its window results as a sink that reads every row writes them
    (no job of its own); a sink that may read part first, or writes nothing, gets them counted apart."""
    from lowwater.spark.sinks import DirectorySink
    from lowwater.spark.sinks.base import DataFrameSink, ForeachDataFrameSink
    from lowwater.spark.sources import PartitionedLogSource

    _write_log(tmp_path / "log")
    env = StreamExecutionEnvironment()
    counts = (
        env.from_source(PartitionedLogSource(tmp_path / "log", FIELDS, max_files_per_trigger=2),
                        WatermarkStrategy.for_bounded_out_of_orderness(1_000).with_timestamp_assigner("ts"))
        .key_by("key").window(TumblingEventTimeWindows.of(10_000)).count()
    )
    out = tmp_path / "out"
    sink: DataFrameSink
    if sink_kind == "directory":
        sink = DirectorySink(out, "parquet")
        assert sink.reads_every_row
    elif sink_kind == "peek":
        sink = ForeachDataFrameSink(_PeekThenWrite(out))
        assert not sink.reads_every_row
    else:
        sink = type("SkipsEveryOther", (_SkipsEveryOther, DataFrameSink), {})(out)
    counts.add_sink(sink)
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, clock=lambda b: T0 + 5_000 * b,
                       end_of_input=True).execute(env, "fired")
    fired = {x["batch_id"]: x["windows_fired"] for x in job.metrics()}
    written = {int(d.name.split("=")[1]): spark.read.parquet(str(d)).count() for d in out.glob("batch=*")}
    assert sum(fired.values()) == 6  # (a, b) x the windows [0, 10 s), [10, 20 s), [20, 30 s); a at 30 s
    assert sum(written.values()) == (6 if sink_kind != "skips" else sum(n for b, n in written.items() if b % 2 == 0))
    for b, n in written.items():
        assert fired[b] == n, (b, fired, written)
    # the committed state counts the same rows: its running total, and each batch's counter
    assert job.store.load_json(job.store.latest_version())["totals"]["windows_fired"] == 6
    assert all(job.store.load_json(b)["metrics"]["windows_fired"] == n for b, n in fired.items()), fired


@pytest.mark.parametrize("lateness_ms", [0, 5_000])
def test_windows_fired_counts_result_rows_on_every_path_when_no_sink_takes_them(spark: Any, tmp_path: Path,
                                                                                lateness_ms: int) -> None:
    """With the only sink on the late side output, ``windows_fired`` still counts result rows
    (one per key and window firing, re-firings of late-but-allowed elements included), as the
    keyed and general paths count their window operator's firings, not window starts; and the
    native and keyed states' running totals are the sums of the batches' values."""
    from lowwater.spark.sources import PartitionedLogSource

    _write_log(tmp_path / "log")
    fired: dict[str, list[int]] = {}
    for path in ("native", "keyed", "general"):
        env = StreamExecutionEnvironment()
        late = OutputTag("late")
        counts = (
            env.from_source(PartitionedLogSource(tmp_path / "log", FIELDS, max_files_per_trigger=2),
                            WatermarkStrategy.for_bounded_out_of_orderness(1_000).with_timestamp_assigner("ts"))
            .key_by("key").window(TumblingEventTimeWindows.of(10_000)).allowed_lateness(lateness_ms)
            .side_output_late_data(late).count()
        )
        lates = CollectSink()
        counts.get_side_output(late).add_sink(lates)
        job = SparkRuntime(str(tmp_path / f"ck-{path}"), spark=spark, path=path, clock=lambda b: T0 + 5_000 * b,
                           end_of_input=True).execute(env, f"fired-{path}")
        assert job.path == path
        assert len(lates.results) == (1 if lateness_ms == 0 else 0)  # b at 3 s: late, or re-fires [0, 10 s)
        lines = job.metrics()
        fired[path] = [x["windows_fired"] for x in lines]
        if path != "general":  # the committed state's running total and per-batch counter agree with the lines
            last = job.store.latest_version()
            assert last == lines[-1]["batch_id"]
            assert job.store.load_json(last)["totals"]["windows_fired"] == sum(fired[path])
            for x in lines:
                assert job.store.load_json(x["batch_id"])["metrics"]["windows_fired"] == x["windows_fired"]
    # (a, b) x [0, 10 s), a x [10, 20 s), (a, b) x [20, 30 s), a x [30, 40 s); b at 3 s re-fires [0, 10 s)
    assert sum(fired["native"]) == (6 if lateness_ms == 0 else 7), fired
    assert fired["native"] == fired["keyed"] == fired["general"], fired
