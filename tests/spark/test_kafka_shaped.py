"""Spark's Kafka source schema, mapped onto lowwater's partitions and source timestamps.

The Kafka connector cannot be fetched here, so the stream is a file source whose rows
have exactly the Kafka source's columns and types.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import OutputTag, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sources import KafkaShapedSource

pytestmark = pytest.mark.spark

KAFKA_SCHEMA = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                "timestamp TIMESTAMP, timestampType INT")


def _record(topic: str, partition: int, offset: int, ts_ms: int, user: str, amount: int) -> dict[str, Any]:
    return {"key": user.encode(), "value": json.dumps({"user": user, "amount": amount}).encode(), "topic": topic,
            "partition": partition, "offset": offset, "timestampType": 0,
            "timestamp": dt.datetime.fromtimestamp(ts_ms / 1000, tz=dt.timezone.utc)}


def test_kafka_partitions_and_record_timestamps_drive_the_watermarks(spark: Any, tmp_path: Path) -> None:
    batches = [
        [_record("clicks", 0, 0, 1_000, "ann", 1), _record("clicks", 1, 0, 2_000, "bob", 2)],
        [_record("clicks", 0, 1, 15_000, "ann", 4)],  # partition 1 silent: [0, 10 s) stays open
        # partition 1 holds the watermark at 1999: ann's 3 s event is on time (a global
        # max-based watermark, 15 s here, would have dropped it)
        [_record("clicks", 1, 1, 12_000, "bob", 8), _record("clicks", 0, 2, 3_000, "ann", 16)],
        [_record("clicks", 0, 3, 4_000, "ann", 32)],  # [0, 10 s) closed at 11999: really late
    ]
    data = tmp_path / "kafka"
    for i, rows in enumerate(batches):
        spark.createDataFrame(rows, KAFKA_SCHEMA).coalesce(1).write.parquet(str(data / f"b{i}"))
    stream = (spark.readStream.schema(KAFKA_SCHEMA).option("maxFilesPerTrigger", 1)
              .option("recursiveFileLookup", "true").option("pathGlobFilter", "*.parquet").parquet(str(data)))
    _stamp(data)

    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    result = (
        env.from_source(KafkaShapedSource(stream, [("user", "STRING"), ("amount", "BIGINT")], topics=["clicks"]),
                        WatermarkStrategy.for_bounded_out_of_orderness(0))  # event time = Kafka timestamp
        .key_by("user").window(TumblingEventTimeWindows.of(10_000)).side_output_late_data(late).sum("amount")
    )
    results, lates = result.collect(), result.get_side_output(late).collect()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)

    marks = [b["combined_watermark"] for b in job.watermarks()]
    # batch 0: p0 999, p1 1999 -> 999; batch 1: p1 still 1999 -> 1999; batch 2: min(14999, 11999)
    assert marks[:4] == [999, 1999, 11999, 11999]
    got = sorted((r.key, r.window_start, r.value) for r in results.results)
    assert got == [("ann", 0, 17), ("ann", 10_000, 4), ("bob", 0, 2), ("bob", 10_000, 8)]
    assert [(e["user"], e["amount"]) for e in lates.results] == [("ann", 32)]
    assert job.batches()[3]["metrics"]["rows_late_by_partition"] == {"0": 1}


def _stamp(root: Path) -> None:
    import os

    for i, f in enumerate(sorted(root.glob("b*/*.parquet"))):
        os.utime(f, (1_000_000 + i, 1_000_000 + i))


def _kafka_stream(spark: Any, root: Path, rows: list[dict[str, Any]]) -> Any:
    spark.createDataFrame(rows, KAFKA_SCHEMA).coalesce(1).write.parquet(str(root / "b0"))
    return (spark.readStream.schema(KAFKA_SCHEMA).option("recursiveFileLookup", "true")
            .option("pathGlobFilter", "*.parquet").parquet(str(root)))


@pytest.mark.parametrize(("topics", "per_topic", "record", "message"), [
    # topic "views" used to be numbered as topics[0]: its partition 0 was clicks' partition 0
    (["clicks"], 1 << 20, ("views", 0, 5),
     r"a record of topic views, partition 0, offset 5, and that topic is not in topics \['clicks'\]"),
    # partition 2 of "clicks" used to be numbered 0 * 2 + 2: "views"' partition 0
    (["clicks", "views"], 2, ("clicks", 2, 5),
     r"a record of topic clicks, partition 2, offset 5, and partitions are numbered 2 to a topic"),
])
def test_a_record_the_topic_numbering_cannot_place_fails_the_query_naming_it(
        spark: Any, tmp_path: Path, topics: list[str], per_topic: int, record: tuple[str, int, int],
        message: str) -> None:
    """Numbered anyway, such a record would be counted under another topic's partition, its
    watermark and its late counts mixed with that partition's, and nothing would say so."""
    from lowwater.core.errors import PipelineError

    topic, partition, offset = record
    stream = _kafka_stream(spark, tmp_path / "kafka", [_record("clicks", 0, 0, 1_000, "ann", 1),
                                                       _record(topic, partition, offset, 2_000, "bob", 2)])
    env = StreamExecutionEnvironment()
    (env.from_source(KafkaShapedSource(stream, [("user", "STRING"), ("amount", "BIGINT")], topics=topics,
                                       partitions_per_topic=per_topic),
                     WatermarkStrategy.for_bounded_out_of_orderness(0))
     .key_by("user").window(TumblingEventTimeWindows.of(10_000)).sum("amount").collect())
    with pytest.raises(PipelineError, match=message):
        SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)


@pytest.mark.parametrize("path", ["native", "general"])
def test_two_topics_number_their_partitions_apart_and_the_metrics_name_each_topic(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str) -> None:
    """Numbered ``index * partitions_per_topic + partition`` inside, the partitions are named
    ``topic-partition`` wherever a person or a program reads them: the metrics' watermarks, late
    counts and dead-letter sample, ``lowwater status`` (until session 47 views' partition 1 was
    "1001" there, and a dead letter's position named no topic)."""
    from lowwater.cli import main
    from lowwater.spark.sinks import ForeachDataFrameSink

    bad = {**_record("views", 1, 2, 4_000, "bob", 0), "value": b"not json"}
    data = tmp_path / "kafka"
    batches = [[_record("clicks", 1, 0, 1_000, "ann", 1), _record("views", 1, 0, 2_000, "bob", 2)],
               [_record("clicks", 1, 1, 15_000, "ann", 4), _record("views", 1, 1, 15_000, "bob", 8)],
               [_record("views", 1, 2, 3_000, "bob", 16), bad]]  # late: [0, 10 s) closed at 14999
    for i, rows in enumerate(batches):
        spark.createDataFrame(rows, KAFKA_SCHEMA).coalesce(1).write.parquet(str(data / f"b{i}"))
    _stamp(data)
    stream = (spark.readStream.schema(KAFKA_SCHEMA).option("maxFilesPerTrigger", 1)
              .option("recursiveFileLookup", "true").option("pathGlobFilter", "*.parquet").parquet(str(data)))
    env = StreamExecutionEnvironment()
    results = (env.from_source(KafkaShapedSource(stream, [("user", "STRING"), ("amount", "BIGINT")],
                                                 topics=["clicks", "views"], partitions_per_topic=1000),
                               WatermarkStrategy.for_bounded_out_of_orderness(0))
               .key_by("user").window(TumblingEventTimeWindows.of(10_000)).sum("amount").collect())
    ck = tmp_path / "ck"
    letters: list[Any] = []
    dead = ForeachDataFrameSink(lambda df, _: letters.extend(df.select("partition", "offset", "file").collect()))
    job = SparkRuntime(str(ck), spark=spark, end_of_input=True, path=path,  # type: ignore[arg-type]
                       dead_letter_sink=dead).execute(env)
    assert job.path == path
    assert sorted((r.key, r.window_start, r.value) for r in results.results) == \
        [("ann", 0, 1), ("ann", 10_000, 4), ("bob", 0, 2), ("bob", 10_000, 8)]
    assert [tuple(r) for r in letters] == [(1001, 2, "views-1")]  # the letter's number, and where it is kept
    assert job.watermarks()[0]["partition_watermarks"] == {"clicks-1": 999, "views-1": 1999}
    last = job.batches()[2]["metrics"]
    assert last["rows_late_by_partition"] == {"views-1": 1}
    assert (last["dead_letter_sample"]["partition"], last["dead_letter_sample"]["offset"]) == ("views-1", 2)
    assert str(job.accounting()) == "6 rows in = 4 windowed + 1 late + 1 dead-lettered"
    capsys.readouterr()
    assert main(["status", str(ck)]) == 0
    shown = capsys.readouterr().out
    assert "views-1" in shown and "clicks-1" in shown and "1001" not in shown, shown
    assert "e.g. partition views-1 offset 2" in shown, shown
    assert shown.index("  clicks-1 ") < shown.index("  views-1 "), shown  # by topic, then partition number
    assert "a source back from idle" not in shown, shown  # one source: the multiplexer's rule, not the valve's


def test_topic_numberings_that_cannot_be_partition_numbers_are_refused(spark: Any) -> None:
    from lowwater.core.errors import ConfigurationError
    from lowwater.spark.dataframe_source import check_topic_numbering, topic_partition_number

    df = spark.createDataFrame([], KAFKA_SCHEMA)
    with pytest.raises(ConfigurationError, match=r"2049 topics of 1048576 partitions each .* at most 2048 topics"):
        KafkaShapedSource(df, [("user", "STRING")], topics=[f"t{i}" for i in range(2049)])
    KafkaShapedSource(df, [("user", "STRING")], topics=[f"t{i}" for i in range(2048)])  # 2048 * 2**20 - 1 fits
    with pytest.raises(ConfigurationError, match=r"names a topic twice"):
        KafkaShapedSource(df, [("user", "STRING")], topics=["a", "b", "a"])
    with pytest.raises(ConfigurationError, match=r"partitions_per_topic.*at least 1"):
        check_topic_numbering(["a"], 0)
    # KafkaSource.partitions(): what the broker says a topic has, numbered as the rows are
    assert topic_partition_number(2, "c", 7, 1000) == 2007
    with pytest.raises(ConfigurationError, match=r"topic 'c' has partition 1000, and partitions are numbered 1000"):
        topic_partition_number(2, "c", 1000, 1000)


# --- a record's value: read as the partitioned log reads it, or a dead letter with the reason

VALUE_FIELDS = [("user", "STRING"), ("at", "TIMESTAMP"), ("amount", "DOUBLE")]


def _parsed(spark: Any, values: list[bytes | None], fields: list[tuple[str, str]] | None = None) -> list[Any]:
    """KafkaShapedSource's rows (the standard columns, the fields, ``_corrupt``) for ``values``,
    over a batch DataFrame of Kafka's schema, in offset order."""
    rows = [{"key": None, "value": v, "topic": "clicks", "partition": 0, "offset": i, "timestampType": 0,
             "timestamp": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)} for i, v in enumerate(values)]
    source = KafkaShapedSource(spark.createDataFrame(rows, KAFKA_SCHEMA), fields or VALUE_FIELDS)
    return source.spark_stream(spark).orderBy("_offset").collect()


ON_TIME = b'"at": "1970-01-01T00:00:02Z"'
BAD_VALUES = {
    # epoch milliseconds as a number: Spark's from_json read it as SECONDS (5,000,000 ms), silently
    "number_for_timestamp": (b'{"user": "ann", "at": 5000, "amount": 2}', "field 'at': 5000 is not a TIMESTAMP"),
    # two events in one value: from_json kept the first and dropped the second
    "two_objects": (b'{"user": "ann", ' + ON_TIME + b', "amount": 2} {"user": "bob", ' + ON_TIME + b', "amount": 3}',
                    "invalid JSON (more after the first value): '{\"user\": \"ann\", "),
    "two_objects_with_a_comma": (b'{"user": "ann", "amount": 2}, {"user": "bob", "amount": 3}',
                                 "invalid JSON (more after the first value): "),
    "trailing_garbage": (b'{"user": "ann", ' + ON_TIME + b', "amount": 2} x',
                         "invalid JSON (more after the first value): "),
    # closes the array [<value>] early: only the object wrapper {"a":<value>} catches it
    "closing_the_array": (b'{"user": "ann"}],[{"user": "bob"}', "invalid JSON (more after the first value): "),
    "nan_for_double": (b'{"user": "ann", ' + ON_TIME + b', "amount": NaN}',
                       "invalid JSON (a syntax error, or a key given twice): "),
    "infinite_double": (b'{"user": "ann", "amount": 1e400}', "field 'amount': Infinity is not a DOUBLE"),
    "number_for_string": (b'{"user": 5, ' + ON_TIME + b', "amount": 2}', "field 'user': 5 is not a STRING"),
    "object_for_string": (b'{"user": {"id": 7}, "amount": 2}', "field 'user': {\"id\":7} is not a STRING"),
    "string_for_double": (b'{"user": "ann", "amount": "2"}', "field 'amount': \"2\" is not a DOUBLE"),
    "tombstone": (None, "value is null (a tombstone), not a JSON object"),
    "array": (b'[{"user": "ann"}]', "value is a JSON array, not an object: '[{\"user\": \"ann\"}]'"),
    "json_null": (b"null", "value is a JSON null, not an object: 'null'"),
    "empty": (b" ", "empty value"),
    "not_utf8": (b'{"user": "\xff"}', "value is not UTF-8: "),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_a_value_the_partitioned_log_would_dead_letter_is_a_dead_letter_with_its_reason(
        spark: Any, case: str) -> None:
    """Before, Spark's lenient from_json read each of these as an element: a number for a
    TIMESTAMP as epoch seconds, the first of two objects, NaN, a number or an object as text."""
    value, reason = BAD_VALUES[case]
    [row] = _parsed(spark, [value])
    assert row["_corrupt"] is not None and row["_corrupt"].startswith(reason), row["_corrupt"]
    assert [row[n] for n, _ in VALUE_FIELDS] == [None, None, None]  # no element: the fields are null
    assert (row["_partition"], row["_offset"]) == (0, 0)  # the dead letter's position


def test_a_declared_type_is_strict_as_on_the_partitioned_log(spark: Any) -> None:
    fields = [("n", "BIGINT"), ("i", "INT"), ("f", "FLOAT"), ("b", "BOOLEAN"), ("d", "DATE")]
    rows = _parsed(spark, [b'{"n": 1.0}', b'{"n": 9223372036854775808}', b'{"n": "7"}', b'{"i": 3000000000}',
                           b'{"f": 1e39}', b'{"b": "true"}', b'{"d": 19000}', b'{"n": 1e2}',
                           b'{"n": -9223372036854775808, "i": -2147483648, "f": 1e38, "b": false, "d": "2024-01-05"}'],
                   fields)
    assert [r["_corrupt"] for r in rows] == [
        "field 'n': 1 (read as DECIMAL(1,0)) is not a BIGINT",
        "field 'n': 9223372036854775808 (read as DECIMAL(19,0)) is not a BIGINT",
        "field 'n': \"7\" is not a BIGINT",
        "field 'i': 3000000000 is not an INT",
        "field 'f': 1.0E39 is not a FLOAT",
        "field 'b': \"true\" is not a BOOLEAN",
        "field 'd': 19000 is not a DATE",
        "field 'n': 100.0 (read as DOUBLE) is not a BIGINT",
        None,
    ]
    assert [rows[-1][n] for n, _ in fields] == [-(2**63), -(2**31), pytest.approx(1e38, rel=1e-7), False,
                                                1_704_412_800_000]


def test_a_good_value_is_read_exactly_as_before(spark: Any) -> None:
    """The from_json conversion is kept for good records: the same values, to the millisecond."""
    from pyspark.sql import functions as F

    fields = [("user", "STRING"), ("at", "TIMESTAMP"), ("amount", "DOUBLE"), ("n", "BIGINT"), ("b", "BOOLEAN"),
              ("d", "DATE"), ("gone", "STRING")]
    values = [b'{"user": "ann", "at": "1970-01-01T00:00:02.5009Z", "amount": 2, "n": -3, "b": true, '
              b'"d": "2024-01-05", "extra": [1, {"x": null}]}',
              b' {"user": "bob", "at": "2024-01-01 12:00:00", "amount": 1.25, "n": null}\n',
              b'{"at": "2024-01-01T00:00:00+02:00", "amount": 1e2}', b"{}"]
    rows = _parsed(spark, list(values), fields)
    assert [r["_corrupt"] for r in rows] == [None] * 4
    got = [tuple(r[n] for n, _ in fields) for r in rows]
    # the conversion before the fix: from_json, then TIMESTAMP and DATE as epoch milliseconds
    df = spark.createDataFrame([(v,) for v in values], "value BINARY")
    v = F.from_json(F.col("value").cast("string"), ", ".join(f"`{n}` {t}" for n, t in fields), {"timeZone": "UTC"})
    old = df.select(v.alias("v")).select(*[
        (F.unix_millis(F.col("v")[n]) if t == "TIMESTAMP" else
         F.unix_date(F.col("v")[n]).cast("long") * F.lit(86_400_000) if t == "DATE" else F.col("v")[n]).alias(n)
        for n, t in fields]).collect()
    assert got == [tuple(r) for r in old]
    assert got[0] == ("ann", 2500, 2.0, -3, True, 1_704_412_800_000, None)
    assert got[2][1:3] == (1_704_060_000_000, 100.0)


def test_a_decimal_field_reads_what_the_log_reads(spark: Any) -> None:
    """A DECIMAL(10,2) field takes the values the log's reader takes, with the same Decimal
    (tests/io/test_fields_and_batches.py's cases), and dead-letters the others, naming the field:
    from_json alone would round 10.005 to 10.01 and read "10.50" and 1e3, without a word."""
    from decimal import Decimal

    from tests.io.test_fields_and_batches import DECIMALS

    rows = _parsed(spark, [b'{"a": %s}' % t.encode() for t, _ in DECIMALS], [("a", "DECIMAL(10,2)")])
    assert [(None if r["_corrupt"] else str(r["a"])) for r in rows] == [e for _, e in DECIMALS]
    for row, (text, expected) in zip(rows, DECIMALS, strict=True):
        if expected is None:
            assert row["_corrupt"].startswith("field 'a': ") and row["_corrupt"].endswith(" is not a DECIMAL(10,2)"), \
                (text, row["_corrupt"])
        else:
            assert isinstance(row["a"], Decimal)


def test_timestamp_and_date_fields_read_what_the_log_reads(spark: Any) -> None:
    """A TIMESTAMP or DATE field takes the texts the log's reader takes, as the same instant
    (tests/io/test_fields_and_batches.py's cases), and dead-letters the others, naming the field.
    Spark's JSON reader alone took ``"5000"`` as the year 5000 and a DATE ``"20240101"`` as 20,240,101
    days after 1970: one such record moved its partition's watermark thousands of years ahead, and the
    partition's later records were late."""
    from tests.io.test_fields_and_batches import TIMES

    rows = _parsed(spark, [json.dumps({"t": t, "d": t}).encode() for t, _, _ in TIMES], [("t", "TIMESTAMP")])
    assert [None if r["_corrupt"] else r["t"] for r in rows] == [ts for _, ts, _ in TIMES]
    assert all(r["_corrupt"] is None or r["_corrupt"].endswith("is not a TIMESTAMP") for r in rows)
    rows = _parsed(spark, [json.dumps({"d": t}).encode() for t, _, _ in TIMES], [("d", "DATE")])
    assert [None if r["_corrupt"] else r["d"] for r in rows] == [d for _, _, d in TIMES]


def test_declared_types_the_log_cannot_read_are_refused(spark: Any) -> None:
    from lowwater.core.errors import ConfigurationError

    df = spark.createDataFrame([], KAFKA_SCHEMA)
    with pytest.raises(ConfigurationError, match=r"field 'tags' has type 'ARRAY<STRING>'; a Kafka value's fields"):
        KafkaShapedSource(df, [("user", "STRING"), ("tags", "ARRAY<STRING>")])
    assert KafkaShapedSource(df, [("n", "long")]).fields() == ["n"]  # the log's aliases


@pytest.mark.parametrize("path", ["native", "keyed", "general"])
def test_a_dead_lettered_kafka_record_is_counted_and_keeps_its_value(spark: Any, tmp_path: Path, path: str) -> None:
    """A number for a TIMESTAMP used to be read as epoch seconds: windowed in the year 1970 + 5,000 s
    * 1000, and its partition's watermark with it, so that every later record was late. A record that
    does not parse keeps its value, as text, in the dead letter's ``record``: Kafka's retention may
    delete the original (until session 35 the letter had its reason's first 200 characters only)."""
    from lowwater.spark.sinks import ForeachDataFrameSink

    def rec(offset: int, value: bytes | None) -> dict[str, Any]:
        return {"key": None, "value": value, "topic": "clicks", "partition": 0, "offset": offset,
                "timestampType": 0, "timestamp": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)}

    def event(user: str, at_s: int, amount: int) -> bytes:
        return json.dumps({"user": user, "at": f"1970-01-01T00:00:{at_s:02d}Z", "amount": amount}).encode()

    batches = [
        [rec(0, event("ann", 1, 1)), rec(1, b'{"user": "ann", "at": 5000, "amount": 100}')],
        [rec(2, event("ann", 2, 2)), rec(3, event("bob", 3, 200) + b" " + event("bob", 4, 300))],
        [rec(4, event("ann", 15, 4)), rec(5, None)],  # closes [0, 10 s); a tombstone
        [rec(6, event("ann", 3, 8))],  # late
    ]
    data = tmp_path / "kafka"
    for i, rows in enumerate(batches):
        spark.createDataFrame(rows, KAFKA_SCHEMA).coalesce(1).write.parquet(str(data / f"b{i}"))
    _stamp(data)
    stream = (spark.readStream.schema(KAFKA_SCHEMA).option("maxFilesPerTrigger", 1)
              .option("recursiveFileLookup", "true").option("pathGlobFilter", "*.parquet").parquet(str(data)))

    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    out = (env.from_source(KafkaShapedSource(stream, [("user", "STRING"), ("at", "TIMESTAMP"), ("amount", "BIGINT")],
                                             topics=["clicks"]),
                           WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("at"))
           .key_by("user").window(TumblingEventTimeWindows.of(10_000)).side_output_late_data(late).sum("amount"))
    results, lates = out.collect(), out.get_side_output(late).collect()
    letters: list[dict[str, Any]] = []  # a DataFrame sink: the native path words its reasons in SQL
    dead = ForeachDataFrameSink(lambda df, _: letters.extend(r.asDict() for r in df.collect()))
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, dead_letter_sink=dead,  # type: ignore[arg-type]
                       end_of_input=True, path=path).execute(env)
    assert job.path == path

    assert sorted((r.key, r.window_start, r.value) for r in results.results) == [("ann", 0, 3), ("ann", 10_000, 4)]
    held = {d["offset"]: d["record"] for d in letters}
    assert held == {1: '{"user": "ann", "at": 5000, "amount": 100}',
                    3: (event("bob", 3, 200) + b" " + event("bob", 4, 300)).decode(), 5: None}  # 5: a tombstone
    assert [(e["user"], e["amount"]) for e in lates.results] == [("ann", 8)]
    why = {d["offset"]: d["reason"] for d in letters}
    assert sorted(why) == [1, 3, 5]
    # the same words on every path, as the reference runtime's BadRecordError.unparsed puts them (the
    # native path wrote the reason without repr's quotes until session 36)
    assert why[1] == "record does not parse: \"field 'at': 5000 is not a TIMESTAMP\"", why
    assert why[3].startswith("record does not parse: 'invalid JSON (more after the first value): ")
    assert why[5] == "record does not parse: 'value is null (a tombstone), not a JSON object'"
    # where each is kept, as a log's letter names its segment file: the topic-partition (null until session 48)
    assert {d["offset"]: d["file"] for d in letters} == {1: "clicks-0", 3: "clicks-0", 5: "clicks-0"}
    assert str(job.accounting()) == "7 rows in = 3 windowed + 1 late + 3 dead-lettered"
    assert job.accounting().balanced
