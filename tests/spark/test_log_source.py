"""The partitioned log on Spark reads what lowwater.io reads, in the batches the reference runtime cuts.

Spark reads the log through a Python streaming data source whose offsets are the log's own
record offsets (:mod:`lowwater.spark.log_stream`), so:

* every complete line of a ``partition=<N>/segment-*`` file is one record or one dead letter,
  exactly as :class:`~lowwater.io.PartitionedLogReader` decodes it, on every path;
* lines appended to a segment are read, and a last line without its newline waits;
* a micro-batch is the same cut on both runtimes, and a restart replays it unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import CollectSink, OutputTag, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.io import PartitionedLogReader, PartitionedLogWriter
from lowwater.runtime.reference import ReferenceRuntime
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sources import PartitionedLogSource

pytestmark = pytest.mark.spark

FIELDS = [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]


def _pipeline(source: PartitionedLogSource) -> tuple[StreamExecutionEnvironment, CollectSink, CollectSink]:
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    out = (env.from_source(source, strategy).key_by("key").window(TumblingEventTimeWindows.of(2000))
           .side_output_late_data(late).sum("value"))
    return env, out.collect(), out.get_side_output(late).collect()


def _spark(spark: Any, source: PartitionedLogSource, ck: Path, path: str = "native",
           end_of_input: bool = True) -> tuple[Any, CollectSink, CollectSink, CollectSink]:
    env, results, late = _pipeline(source)
    dead = CollectSink()
    job = SparkRuntime(str(ck), spark=spark, path=path, dead_letter_sink=dead,  # type: ignore[arg-type]
                       end_of_input=end_of_input, clock=lambda b: 1000 * b).execute(env)
    return job, results, late, dead


def _reference(source: PartitionedLogSource) -> tuple[CollectSink, CollectSink, CollectSink]:
    env, results, late = _pipeline(source)
    dead = CollectSink()
    ReferenceRuntime(dead_letter_sink=dead).execute(env)
    return results, late, dead


def _windows(results: CollectSink) -> dict[tuple[str, int], Any]:
    last: dict[tuple[str, int], Any] = {}
    for r in results.results:
        k = (r.key, r.window_start)
        if k not in last or r.fire_index >= last[k].fire_index:
            last[k] = r
    return {k: r.value for k, r in last.items()}


def _positions(sink: CollectSink) -> list[tuple[int, int]]:
    return sorted((d["partition"], d["offset"]) for d in sink.results)


def _late(sink: CollectSink) -> list[Any]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in sink.results)


def _hostile_log(root: Path) -> tuple[list[tuple[int, int]], int]:
    """A log whose partition 0 holds every kind of line that is not one record; the positions
    of the bad lines, and the number of complete lines in the log's partitions."""
    w = PartitionedLogWriter(root, "jsonl")
    w.append(1, [{"key": "b", "ts": 100, "value": 5}, {"key": "b", "ts": 2500, "value": 6}])
    good = '{"partition": 0, "offset": %d, "timestamp": null, "value": {"key": "a", "ts": %d, "value": 1}}'
    lines: list[bytes] = [
        (good % (0, 10)).encode(),
        b'{"partition": 9, "offset": 1, "value": {"key": "a", "ts": 20, "value": 1}}',  # not its directory
        b"",                                                                             # blank
        b"   \t",                                                                        # whitespace
        b"[]",
        b'[{"value": {"key": "a", "ts": 30, "value": 1}}, {"value": {"key": "a", "ts": 40, "value": 1}}]',
        b'{"value": {"key": "a", "ts": 50, "value": 1}}',                     # no envelope: fine
        b'{"offset": "7", "value": {"key": "a", "ts": 60, "value": 1}}',      # offset of the wrong type
        b'{"value": {"key": "\xff\xfe", "ts": 70, "value": 1}}',              # not UTF-8
        b"[" * 3000 + b"]" * 3000,                                            # nested 3,000 deep
        b'{"value": {"key": "a", "ts": 2100, "value": 1}}',
        b'{"value": {"key": "a", "ts": "80", "value": 1}}',                   # a string for a BIGINT
    ]
    bad = [(0, k) for k in (1, 2, 3, 4, 5, 7, 8, 9, 11)]
    part = root / "partition=0"
    part.mkdir()
    (part / f"segment-{0:020d}.jsonl").write_bytes(b"\n".join(lines) + b"\n" + b'{"value": {"key": "a"')
    # outside the layout: a backup copy of a partition and a stray segment at the root
    shutil.copytree(root / "partition=1", root / "partition=1.bak")
    (root / f"segment-{0:020d}.jsonl").write_text("not json at all\n")
    return bad, len(lines) + 2


@pytest.mark.parametrize("path", ["native", "executor", "keyed", "general"])
def test_every_line_is_one_record_or_one_dead_letter_as_lowwater_io_reads_it(
        spark: Any, tmp_path: Path, path: str) -> None:
    bad, lines = _hostile_log(tmp_path / "log")
    read = PartitionedLogReader(tmp_path / "log").read({0: 0, 1: 0})
    assert [(r.partition, r.offset) for r in read if r.error] == bad[:-1] and len(read) == lines  # the last: typed
    source = PartitionedLogSource(tmp_path / "log", FIELDS)

    ref_results, ref_late, ref_dead = _reference(source)
    job, results, late, dead = _spark(spark, source, tmp_path / "ck", path)

    assert job.path == path
    assert _positions(dead) == _positions(ref_dead) == bad  # the directory decides; nothing outside is read
    assert _windows(results) == _windows(ref_results) == {("a", 0): 2, ("a", 2000): 1, ("b", 0): 5, ("b", 2000): 6}
    assert _late(late) == _late(ref_late)
    assert str(job.accounting()) == f"{lines} rows in = {lines - len(bad)} windowed + 0 late + {len(bad)} dead-lettered"
    reasons = {d["offset"]: d["reason"] for d in dead.results}
    assert "does not match directory 0" in reasons[1] and "not UTF-8" in reasons[8] and "nested" in reasons[9]
    assert "'7'" in reasons[7] and "field 'ts'" in reasons[11]


def test_lines_appended_to_a_segment_are_read_and_an_unterminated_line_waits(spark: Any, tmp_path: Path) -> None:
    log = tmp_path / "log"
    PartitionedLogWriter(log).append(0, [{"key": "a", "ts": 100, "value": 1}])
    segment = next((log / "partition=0").glob("segment-*.jsonl"))
    with open(segment, "a") as f:
        f.write('{"value": {"key": "a", "ts": 200, "value": 2}}\n{"value": {"key": "a", "ts": 300, "val')
    source = PartitionedLogSource(log, FIELDS)
    job, _, _, dead = _spark(spark, source, tmp_path / "ck", end_of_input=False)
    assert str(job.accounting()) == "2 rows in = 2 windowed + 0 late + 0 dead-lettered"
    assert dead.results == []  # the half-written line is not yet a record

    with open(segment, "a") as f:  # the producer finishes its line and appends one more
        f.write('ue": 4}}\n{"value": {"key": "a", "ts": 2500, "value": 8}}\n')
    job, results, _, dead = _spark(spark, source, tmp_path / "ck")
    assert str(job.accounting()) == "4 rows in = 4 windowed + 0 late + 0 dead-lettered"
    assert dead.results == []
    assert _windows(results) == {("a", 0): 7, ("a", 2000): 8}


def _segments(log: Path, stamps: list[list[int]]) -> None:
    w = PartitionedLogWriter(log)
    for ts in stamps:
        w.append(0, [{"key": "k", "ts": t, "value": 1} for t in ts])


# one segment per batch: 10_000 moves the watermark on, so the next segment's 1_000 is late,
# unless both segments are planned as one batch
STAMPS = [[100, 200], [300], [10_000], [1_000, 12_000]]


def test_a_restart_that_lost_its_last_offset_log_entry_replans_the_same_batch(spark: Any, tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    _segments(whole, STAMPS)
    source = PartitionedLogSource(whole, FIELDS, segments_per_batch=1)
    _, ref_late, _ = _reference(source)
    job, _, late, _ = _spark(spark, source, tmp_path / "ck-whole", end_of_input=False)
    uninterrupted = [(m["batch_id"], m["rows_in"], m["rows_late"]) for m in job.metrics()]
    assert uninterrupted == [(0, 2, 0), (1, 1, 0), (2, 1, 0), (3, 2, 1)]
    assert _late(late) == _late(ref_late) and len(late.results) == 1

    log, ck = tmp_path / "log", tmp_path / "ck"
    _segments(log, STAMPS[:3])
    _spark(spark, PartitionedLogSource(log, FIELDS, segments_per_batch=1), ck, end_of_input=False)
    # killed after planning batch 2 but before Spark's offset log had it: only batches 0 and 1
    # are on record, and more data arrives while the job is down
    for name in ("offsets", "commits"):
        for entry in ("2", ".2.crc"):
            (ck / "spark" / name / entry).unlink(missing_ok=True)
    _segments(log, STAMPS[3:])
    job, _, late, _ = _spark(spark, PartitionedLogSource(log, FIELDS, segments_per_batch=1), ck, end_of_input=False)
    assert [(m["batch_id"], m["rows_in"], m["rows_late"]) for m in job.metrics()] == uninterrupted
    assert _late(late) == _late(ref_late)
    assert not (ck / "spark" / "sources" / "0" / "3").exists()  # Spark keeps no file list of its own


def test_spark_reads_segments_in_offset_order_whatever_their_modification_times(spark: Any, tmp_path: Path) -> None:
    log = tmp_path / "log"
    _segments(log, STAMPS)
    for i, segment in enumerate(sorted((log / "partition=0").glob("segment-*"))):
        os.utime(segment, (2_000_000 - i, 2_000_000 - i))  # the newest segment looks oldest
    source = PartitionedLogSource(log, FIELDS, records_per_batch=1)
    ref_results, ref_late, _ = _reference(source)
    job, results, late, _ = _spark(spark, source, tmp_path / "ck")
    assert _windows(results) == _windows(ref_results)
    assert _late(late) == _late(ref_late) and len(late.results) == 1
    assert [m["rows_in"] for m in job.metrics() if m["rows_in"]] == [1] * 6


def test_a_second_session_of_the_application_reads_the_log_too(spark: Any, tmp_path: Path) -> None:
    """Spark refused to register the log's data source in a second session once the first had
    (DATA_SOURCE_ALREADY_EXISTS): a pipeline on ``spark.newSession()`` failed before it started."""
    log = tmp_path / "log"
    _segments(log, STAMPS)
    source = PartitionedLogSource(log, FIELDS, records_per_batch=1)
    _spark(spark, source, tmp_path / "ck-first")  # registers it in the first session
    ref_results, ref_late, _ = _reference(source)
    job, results, late, _ = _spark(spark.newSession(), source, tmp_path / "ck-second")
    assert _windows(results) == _windows(ref_results) and _late(late) == _late(ref_late)
    assert [m["rows_in"] for m in job.metrics() if m["rows_in"]] == [1] * 6 and job.accounting().balanced


def test_a_second_log_source_in_a_session_registers_nothing_again_and_logs_no_warning(
        spark: Any, tmp_path: Path) -> None:
    """``lowwater demo`` printed "WARN DataSourceManager: The data source lowwater_partitioned_log
    replaced a previously registered data source" under its second run: every log source
    registered the data source again. Read from Spark's own log, through a log4j appender."""
    from lowwater.io.log_batches import LogBatching
    from lowwater.spark.log_stream import FORMAT_NAME, log_stream

    session = spark.newSession()  # a session where the source is not registered yet
    jvm = spark._jvm
    logger = jvm.org.apache.logging.log4j.LogManager.getContext(False).getLogger(
        "org.apache.spark.sql.execution.datasources.DataSourceManager")
    written = jvm.java.io.StringWriter()
    appender = jvm.org.apache.logging.log4j.core.appender.WriterAppender.createAppender(
        jvm.org.apache.logging.log4j.core.layout.PatternLayout.createDefaultLayout(), None, written,
        "lowwater-test", False, True)
    appender.start()
    level = logger.getLevel()
    logger.addAppender(appender)
    logger.setLevel(jvm.org.apache.logging.log4j.Level.WARN)
    try:
        for log in ("a", "b", "a"):
            log_stream(session, str(tmp_path / log), FIELDS, LogBatching(records_per_batch=None, segments_per_batch=1))
    finally:
        logger.removeAppender(appender)
        logger.setLevel(level)
        appender.stop()
    assert session._jsparkSession.sessionState().dataSourceManager().dataSourceExists(FORMAT_NAME)
    assert "replaced a previously registered data source" not in written.toString(), written.toString()


def test_a_timestamp_field_is_event_time_in_milliseconds(spark: Any, tmp_path: Path) -> None:
    log = tmp_path / "log"
    PartitionedLogWriter(log).append(0, [
        {"key": "a", "at": "2024-05-01T10:00:00.250Z", "value": 1},
        {"key": "a", "at": "2024-05-01T10:00:01.999999", "value": 2},  # no zone: UTC; floored to ms
        {"key": "a", "at": "2024-05-01T12:00:02+02:00", "value": 4},
        {"key": "a", "at": 1714557600000, "value": 8},                # a number is not a TIMESTAMP
    ])
    fields = [("key", "STRING"), ("at", "TIMESTAMP"), ("value", "BIGINT")]
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("at")
    out = (env.from_source(PartitionedLogSource(log, fields), strategy).key_by("key")
           .window(TumblingEventTimeWindows.of(1000)).sum("value")).collect()
    dead = CollectSink()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, dead_letter_sink=dead,  # type: ignore[arg-type]
                       end_of_input=True).execute(env)
    ten = 1714557600000  # 2024-05-01T10:00:00Z in ms
    assert job.path == "native"
    assert _windows(out) == {("a", ten): 1, ("a", ten + 1000): 2, ("a", ten + 2000): 4}
    assert _positions(dead) == [(0, 3)] and "is not a TIMESTAMP" in dead.results[0]["reason"]


@pytest.mark.parametrize("path", ["reference", "native", "keyed"])
def test_a_decimal_field_sums_exactly_and_a_value_it_would_round_is_a_dead_letter(
        spark: Any, tmp_path: Path, path: str) -> None:
    """Money in a log: a DECIMAL(20,2) field is read from the numbers' text (a float keeps 15 to 17
    digits), summed exactly on every runtime and path, and a value with more places is a dead letter."""
    from decimal import Decimal

    log = tmp_path / "log"
    PartitionedLogWriter(log).append(0, [
        {"key": "a", "ts": 1, "amount": 0.1}, {"key": "a", "ts": 2, "amount": 0.2},
        {"key": "a", "ts": 3, "amount": 10.005},                      # three places: not a DECIMAL(20,2)
        {"key": "b", "ts": 4, "amount": 7}])
    with (log / "partition=0").joinpath(sorted(os.listdir(log / "partition=0"))[0]).open("a") as f:
        f.write(json.dumps({"partition": 0, "offset": 4, "timestamp": None, "value": {"key": "b", "ts": 5}})[:-2]
                + ', "amount": 123456789012345678.25}}\n')         # 20 digits, written as text
    fields = [("key", "STRING"), ("ts", "BIGINT"), ("amount", "DECIMAL(20,2)")]
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    out = (env.from_source(PartitionedLogSource(log, fields), strategy).key_by("key")
           .window(TumblingEventTimeWindows.of(1000)).sum("amount")).collect()
    dead = CollectSink()
    if path == "reference":
        ReferenceRuntime(dead_letter_sink=dead).execute(env)
    else:
        job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, dead_letter_sink=dead,  # type: ignore[arg-type]
                           end_of_input=True).execute(env)
        assert job.path == path
    assert _windows(out) == {("a", 0): Decimal("0.30"), ("b", 0): Decimal("123456789012345685.25")}
    assert all(type(v) is Decimal for v in _windows(out).values())
    assert _positions(dead) == [(0, 2)] and "field 'amount': 10.005 is not a DECIMAL(20,2)" in dead.results[0]["reason"]


def test_a_log_given_as_a_file_uri_is_read_as_its_path(spark: Any, tmp_path: Path) -> None:
    log = tmp_path / "log"
    _segments(log, STAMPS)
    source = PartitionedLogSource(f"file://{log}", FIELDS, records_per_batch=1)
    ref_results, _ref_late, _ = _reference(PartitionedLogSource(log, FIELDS, records_per_batch=1))
    _job, results, _late, _ = _spark(spark, source, tmp_path / "ck")
    assert _windows(results) == _windows(ref_results) and results.results


def _sums_and_letters(runtime: Any, log: Path, strategy: Any, path: str) -> tuple[list[Any], list[Any], str]:
    """A log of ``key, value`` (one segment a batch) in tumbling 1 s windows, summed on the native and
    executor paths and reduced on the others (a sum would take the native one), run by
    ``runtime(dead_letter_sink)``: the sums, ``(offset, reason)`` of the dead letters, the account."""
    env = StreamExecutionEnvironment()
    source = PartitionedLogSource(log, [("key", "STRING"), ("value", "BIGINT")], segments_per_batch=1)
    windowed = env.from_source(source, strategy).key_by("key").window(TumblingEventTimeWindows.of(1000))
    sums = (windowed.sum("value") if path in ("native", "executor")
            else windowed.reduce(lambda a, b: {"key": a["key"], "value": a["value"] + b["value"]})).collect()
    dead = CollectSink()
    job = runtime(dead).execute(env)
    got = sorted((r.key, r.window_start, r.value if isinstance(r.value, int) else r.value["value"])
                 for r in sums.results)
    return got, [(d["offset"], d["reason"]) for d in dead.results], str(job.accounting())


@pytest.mark.parametrize("path", ["native", "executor", "keyed", "general"])
def test_a_source_timestamp_that_is_null_or_the_marker_is_a_dead_letter_on_every_path(
        spark: Any, tmp_path: Path, path: str) -> None:
    """With the log's own timestamps (no assigner), a record stored with none, or with Long.MIN_VALUE,
    is a dead letter on every path, with the native path's reason. The reference runtime, the keyed
    and the general paths failed the job with a ConfigurationError asking whether
    assign_timestamps_and_watermarks was forgotten; the executor path called a null one the marker."""
    writer = PartitionedLogWriter(tmp_path / "log")
    writer.append(0, [{"key": "a", "value": 1}, {"key": "a", "value": 2}, {"key": "b", "value": 4}], [100, None, 200])
    writer.append(0, [{"key": "a", "value": 8}], [-(2**63)])
    writer.append(0, [{"key": "a", "value": 16}], [5_000])

    def run(runtime: Any) -> tuple[list[Any], list[Any], str]:
        return _sums_and_letters(runtime, tmp_path / "log", WatermarkStrategy.for_bounded_out_of_orderness(0), path)

    want = run(lambda dead: ReferenceRuntime(dead_letter_sink=dead))
    assert want == ([("a", 0, 1), ("a", 5_000, 16), ("b", 0, 4)],
                    [(1, "missing or non-numeric timestamp (source timestamp)"),
                     (3, "timestamp is Long.MIN_VALUE, Flink's no-timestamp marker (source timestamp)")],
                    "5 rows in = 3 windowed + 0 late + 2 dead-lettered")
    assert run(lambda dead: SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, dead_letter_sink=dead,
                                         end_of_input=True)) == want


@pytest.mark.parametrize("path", ["executor", "keyed", "general"])
def test_a_marker_a_python_assigner_returned_is_a_dead_letter_naming_it_on_every_path(
        spark: Any, tmp_path: Path, path: str) -> None:
    """A Python assigner that returns Long.MIN_VALUE for a record the log stored a timestamp for:
    its dead letter names the assigner on every path, as the reference runtime's does. The
    executor path's said "(source timestamp)" (a user probe, session 64)."""
    writer = PartitionedLogWriter(tmp_path / "log")
    writer.append(0, [{"key": "a", "value": 1}, {"key": "a", "value": 2}, {"key": "b", "value": 4}], [100, 150, 200])

    def assign(e: dict[str, Any], prev: int) -> int:
        return -(2**63) if e["value"] == 2 else prev

    def run(runtime: Any) -> tuple[list[Any], list[Any], str]:
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(assign)
        return _sums_and_letters(runtime, tmp_path / "log", strategy, path)

    want = run(lambda dead: ReferenceRuntime(dead_letter_sink=dead))
    assert want == ([("a", 0, 1), ("b", 0, 4)],
                    [(1, "timestamp is Long.MIN_VALUE, Flink's no-timestamp marker (TimestampAssigner("
                         "'test_a_marker_a_python_assigner_returned_is_a_dead_letter_naming_it_on_every_path.<locals>."
                         "assign') returned it)")],
                    "3 rows in = 2 windowed + 0 late + 1 dead-lettered")
    assert run(lambda dead: SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, dead_letter_sink=dead,
                                         end_of_input=True)) == want
