"""Any streaming DataFrame in: partition, offset and timestamp by name or Column, TIMESTAMP as milliseconds."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from lowwater.api import CollectSink, OutputTag, StreamExecutionEnvironment
from lowwater.core.errors import ConfigurationError
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.engine import SparkRuntime
from lowwater.spark.sources import DataFrameSource

pytestmark = pytest.mark.spark

SCHEMA = "p INT, o BIGINT, at TIMESTAMP, user STRING, amount BIGINT"
T0 = dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.timezone.utc)
T0_MS = 1_714_557_600_000


def _at(ms: int) -> dt.datetime:
    return T0 + dt.timedelta(milliseconds=ms)


def _stream(spark: Any, root: Path, batches: list[list[tuple[Any, ...]]]) -> Any:
    for i, rows in enumerate(batches):
        spark.createDataFrame(rows, SCHEMA).coalesce(1).write.parquet(str(root / f"b{i}"))
    return (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).option("recursiveFileLookup", "true")
            .option("pathGlobFilter", "*.parquet").parquet(str(root)))


@pytest.mark.parametrize("by", ["name", "column"])
def test_a_timestamp_column_is_event_time_in_milliseconds_per_partition(spark: Any, tmp_path: Path, by: str) -> None:
    from pyspark.sql import functions as F

    df = _stream(spark, tmp_path / "in", [[
        (0, 0, _at(999), "ann", 1),          # [T0, T0 + 1 s)
        (1, 0, _at(1_000), "ann", 2),        # [T0 + 1 s, T0 + 2 s)
        (0, 1, _at(2_500), "bob", 4),
        (1, 1, _at(1_999), "ann", 8),
    ]])
    cols = {"partition": "p", "offset": "o", "timestamp": "at"} if by == "name" else \
        {"partition": F.col("p") + 0, "offset": F.col("o"), "timestamp": F.col("at")}
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    out = (env.from_source(DataFrameSource(df, **cols), WatermarkStrategy.for_bounded_out_of_orderness(0))
           .key_by("user").window(TumblingEventTimeWindows.of(1000)).side_output_late_data(late).sum("amount"))
    results = out.collect()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    assert job.path == "native"
    assert sorted((r.key, r.window_start - T0_MS, r.value) for r in results.results) == [
        ("ann", 0, 1), ("ann", 1000, 10), ("bob", 2000, 4)]


def test_the_element_sees_a_timestamp_field_as_milliseconds_and_rows_need_no_offset(
        spark: Any, tmp_path: Path) -> None:
    df = _stream(spark, tmp_path / "in", [[(0, 0, _at(1_500), "ann", 3), (0, 1, _at(1_600), None, 5)]])
    env = StreamExecutionEnvironment()
    seen = (env.from_source(DataFrameSource(df, partition="p"),  # no offset: the general path steps them anyway
                            WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("at"))
            .key_by("user").window(TumblingEventTimeWindows.of(1000)).sum("amount")).collect()
    dead = CollectSink()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path="general",
                       dead_letter_sink=dead, end_of_input=True).execute(env)  # type: ignore[arg-type]
    assert [(r.window_start - T0_MS, r.value) for r in seen.results] == [(1000, 3)]
    assert [(d["partition"], d["offset"], d["reason"]) for d in dead.results] == [(0, None, "missing key (user)")]
    assert str(job.accounting()) == "2 rows in = 1 windowed + 0 late + 1 dead-lettered"


def test_a_timestamp_of_another_type_is_an_error_when_the_source_is_made(spark: Any, tmp_path: Path) -> None:
    df = _stream(spark, tmp_path / "in", [[(0, 0, _at(0), "ann", 1)]])
    with pytest.raises(ConfigurationError, match="'user' is a StringType"):
        DataFrameSource(df, timestamp="user")
    with pytest.raises(ConfigurationError, match="no column 'time' in df") as e:
        DataFrameSource(df, timestamp="time")
    assert e.value.parameter == "timestamp", "the parameter that names it, not df"
    with pytest.raises(ConfigurationError, match="no column 'p2' in df") as e:
        DataFrameSource(df, partition="p2")
    assert e.value.parameter == "partition"


def test_a_batch_dataframe_is_refused_before_the_query_starts(spark: Any, tmp_path: Path) -> None:
    """Spark refused it only when the query started, with "Union between streaming and batch
    DataFrames/Datasets is not supported" and the plan dumped after it."""
    df = spark.createDataFrame([(0, 0, 1)], "p INT, o BIGINT, ms BIGINT")
    env = StreamExecutionEnvironment()
    (env.from_source(DataFrameSource(df, partition="p", offset="o", timestamp="ms"),
                     WatermarkStrategy.for_bounded_out_of_orderness(0))
     .key_by("p").window(TumblingEventTimeWindows.of(1000)).count().collect())
    with pytest.raises(ConfigurationError, match="is a batch DataFrame; a source needs a streaming one") as e:
        SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    assert e.value.parameter == "df" and "Union" not in str(e.value)
    assert not (tmp_path / "ck").exists(), "refused before anything ran"


@pytest.mark.parametrize("path", ["native", "keyed", "general"])
def test_a_double_key_column_groups_its_nans_and_zeros_alike_and_a_nan_is_the_max_on_every_path(
        spark: Any, tmp_path: Path, path: str) -> None:
    """Spark's grouping makes every NaN one key and ``-0.0`` the key ``0.0`` (the native path); the
    keyed and general paths made each record's NaN a key of its own, a result per record, and
    ``-0.0`` apart from ``0.0`` or not as their buckets fell. A NaN value is the ``max`` (Spark's
    order and Java's ``Double.compareTo``); in Python it was the max only if it came first."""
    schema = "p INT, o BIGINT, at TIMESTAMP, k DOUBLE, v DOUBLE"
    nan = float("nan")
    rows = [(nan, 1.0), (-0.0, 2.0), (0.0, nan), (nan, 3.0), (1.5, 5.0), (-0.0, 4.0), (nan, 2.0)]
    spark.createDataFrame([(0, i, _at(i), k, v) for i, (k, v) in enumerate(rows)], schema).coalesce(1) \
        .write.parquet(str(tmp_path / "in"))
    df = spark.readStream.schema(schema).parquet(str(tmp_path / "in"))
    env = StreamExecutionEnvironment()
    results = (env.from_source(DataFrameSource(df, partition="p", offset="o", timestamp="at"),
                               WatermarkStrategy.for_bounded_out_of_orderness(0))
               .key_by("k").window(TumblingEventTimeWindows.of(1000)).max("v").collect())
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True, path=path).execute(env)
    assert job.path == path
    assert sorted((repr(r.key), repr(r.value)) for r in results.results) == [
        ("0.0", "nan"), ("1.5", "5.0"), ("nan", "3.0")]


def test_a_key_that_is_no_column_says_to_add_the_column_not_to_declare_value_fields(
        spark: Any, tmp_path: Path) -> None:
    """A DataFrameSource's fields are its DataFrame's columns: the advice to "declare the field in the
    source's value_fields" named a parameter it does not have."""
    df = _stream(spark, tmp_path / "in", [[(0, 0, _at(0), "ann", 1)]])
    env = StreamExecutionEnvironment()
    (env.from_source(DataFrameSource(df, partition="p", offset="o", timestamp="at"),
                     WatermarkStrategy.for_bounded_out_of_orderness(0))
     .key_by("usr").window(TumblingEventTimeWindows.of(1000)).sum("amount").collect())
    with pytest.raises(ConfigurationError, match='key_by\\("usr"\\) names a field that DataFrameSource') as e:
        SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    assert 'did you mean "user"?' in str(e.value)
    assert str(e.value).endswith("add the column to the source's DataFrame (withColumn)")
    assert "value_fields" not in str(e.value)


@pytest.mark.parametrize(("partition", "shown"), [
    ("p", "null"), (-1, "-1"), (2**31, "2147483648"),
])
@pytest.mark.parametrize("path", ["native", "keyed"])
def test_a_row_whose_partition_is_not_a_partition_number_fails_the_query_naming_it(
        spark: Any, tmp_path: Path, partition: Any, shown: str, path: str) -> None:
    """A null, negative or too large partition used to reach the driver's watermark code as
    ``int(None)`` (a TypeError naming nothing) or to fail Spark's INT cast; now the query
    fails with what is wrong and where."""
    from pyspark.sql import functions as F

    from lowwater.core.errors import PipelineError

    df = _stream(spark, tmp_path / "in", [[(0, 0, _at(0), "ann", 1), (None, 7, _at(5), "ann", 2)]])
    bad = F.col("p") if partition == "p" else F.when(F.col("o") == 7, F.lit(partition)).otherwise(F.col("p"))
    env = StreamExecutionEnvironment()
    windowed = (env.from_source(DataFrameSource(df, partition=bad, offset="o"),
                                WatermarkStrategy.for_bounded_out_of_orderness(0))
                .key_by("user").window(TumblingEventTimeWindows.of(1000)))
    (windowed.sum("amount") if path == "native" else windowed.reduce(lambda a, b: a)).collect()
    with pytest.raises(PipelineError, match=rf"the partition .* of a row is {shown} \(its offset: 7\); "
                                            r"a partition must be an integer from 0 to 2147483647"):
        SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)


ODD_SCHEMA = "p INT, o BIGINT, at TIMESTAMP, user STRING, amount STRING, flag BOOLEAN"


@pytest.mark.parametrize("path", ["native", "executor", "keyed", "general"])
@pytest.mark.parametrize(("field", "reasons"), [
    ("amount", ["non-numeric value (amount): '5'", "missing value (amount)", "non-numeric value (amount): \"x'y\""]),
    ("flag", ["non-numeric value (flag): True", "missing value (flag)", "non-numeric value (flag): False"]),
])
def test_a_sum_of_a_column_that_is_not_a_number_dead_letters_each_row_as_the_reference_runtime_does(
        spark: Any, tmp_path: Path, path: str, field: str, reasons: list[str]) -> None:
    """The reference runtime's sum takes numbers only (a string or a boolean is a dead letter,
    BuiltinAggregate.check); the native path cast a STRING column to DOUBLE (ANSI mode: the
    query failed on ``'x'y'``; without it, ``'5'`` summed to 5.0) and summed a BOOLEAN as 1/0."""
    rows = [(0, 0, _at(0), "ann", "5", True), (0, 1, _at(10), "ann", None, None), (0, 2, _at(20), "bob", "x'y", False)]
    spark.createDataFrame(rows, ODD_SCHEMA).coalesce(1).write.parquet(str(tmp_path / "in" / "b0"))
    df = spark.readStream.schema(ODD_SCHEMA).option("recursiveFileLookup", "true").parquet(str(tmp_path / "in"))
    env = StreamExecutionEnvironment()
    sums = (env.from_source(DataFrameSource(df, partition="p", offset="o"),
                            WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("at"))
            .key_by("user").window(TumblingEventTimeWindows.of(1000)).sum(field)).collect()
    dead = CollectSink()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, dead_letter_sink=dead,  # type: ignore[arg-type]
                       end_of_input=True).execute(env)
    assert job.path == path
    assert sums.results == []
    assert [(d["offset"], d["reason"]) for d in sorted(dead.results, key=lambda d: d["offset"])] == \
        list(enumerate(reasons))
    assert str(job.accounting()) == "3 rows in = 0 windowed + 0 late + 3 dead-lettered"


def test_the_dead_letter_frame_shows_a_string_value_as_python_s_repr(spark: Any) -> None:
    """A DataFrame dead-letter sink gets the native path's reason from SQL; it reads as the
    reference runtime's (Python's ``repr``), quotes and escapes included."""
    from lowwater.core.errors import BadRecordError
    from lowwater.spark.native import _python_repr_sql

    values = ["5", "x'y", 'say "hi"', "both ' and \"", "back\\slash", "two\nlines\r\n", "a\ttab", ""]
    got = [r[0] for r in spark.createDataFrame([(v,) for v in values], "amount STRING")
           .selectExpr(_python_repr_sql("amount", "string")).collect()]
    assert got == [BadRecordError.non_numeric("amount", v) for v in values]


@pytest.mark.parametrize("time_zone", ["UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata"])
def test_a_timestamp_ntz_value_that_is_no_local_time_of_the_session_is_not_moved(spark: Any, time_zone: str) -> None:
    """A TIMESTAMP_NTZ wall-clock time that does not exist in the session's zone (the hour a
    daylight-saving change skips, a historic change of offset) is read as UTC like any other:
    Spark's cast to TIMESTAMP in the session's zone moved it an hour later, so an event at
    02:59:59.999 came after one at 03:00 and an on-time event could be late."""
    import calendar
    import datetime as dt

    from lowwater.spark.dataframe_source import _event_time_ms

    walls = [dt.datetime(2024, 3, 10, 2, 0), dt.datetime(2024, 3, 10, 2, 59, 59, 999_999),  # New York's gap
             dt.datetime(2024, 3, 10, 3, 0), dt.datetime(2024, 3, 31, 2, 30),  # Berlin's
             dt.datetime(1941, 10, 1, 0, 30, 0, 500),  # Kolkata's, in 1941
             dt.datetime(2024, 11, 3, 1, 30),  # New York's hour that comes twice
             dt.datetime(1969, 12, 31, 23, 59, 59, 999_500), dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59)]
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", time_zone)
    try:
        df = spark.createDataFrame([(w,) for w in walls], "at TIMESTAMP_NTZ")
        got = [r[0] for r in df.select(_event_time_ms(df["at"], "TimestampNTZType")).collect()]
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
    assert got == [calendar.timegm(w.timetuple()) * 1000 + w.microsecond // 1000 for w in walls]


@pytest.mark.parametrize("time_zone", ["UTC", "America/New_York"])
def test_a_timestamp_ntz_column_is_its_wall_clock_time_in_utc_milliseconds(
        spark: Any, tmp_path: Path, time_zone: str) -> None:
    """A TIMESTAMP_NTZ column (as the source timestamp, or as a field) is milliseconds of its
    wall-clock time read as UTC, whatever the session's time zone; it was refused as the
    timestamp, and as a field it reached the element as a datetime."""
    import datetime as dt

    schema = "p INT, o BIGINT, at TIMESTAMP_NTZ, user STRING, amount BIGINT"
    naive = dt.datetime(2024, 5, 1, 10, 0)
    rows = [(0, 0, naive + dt.timedelta(microseconds=999_999), "ann", 1),
            (0, 1, naive + dt.timedelta(seconds=1), "ann", 2),
            (0, 2, dt.datetime(1969, 12, 31, 23, 59, 59, 999_500), "bob", 4)]  # floored: -1 ms
    spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(tmp_path / "in" / "b0"))
    df = spark.readStream.schema(schema).option("recursiveFileLookup", "true").parquet(str(tmp_path / "in"))
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", time_zone)
    try:
        env = StreamExecutionEnvironment()
        stream = env.from_source(DataFrameSource(df, partition="p", offset="o", timestamp="at"),
                                 WatermarkStrategy.for_bounded_out_of_orderness(0))
        sums = stream.key_by("user").window(TumblingEventTimeWindows.of(1000)).sum("amount").collect()
        seen = stream.map(lambda e: (e["user"], e["at"])).collect()
        SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
    assert sorted(seen.results) == [("ann", T0_MS + 999), ("ann", T0_MS + 1000), ("bob", -1)]
    assert sorted((r.key, r.window_start, r.value) for r in sums.results) == [
        ("ann", T0_MS, 1), ("ann", T0_MS + 1000, 2), ("bob", -1000, 4)]


@pytest.mark.parametrize("path", ["native", "keyed"])
def test_a_decimal_sum_is_exact_past_its_column_s_precision(spark: Any, tmp_path: Path, path: str) -> None:
    """The native path summed a DECIMAL(10,2) as a DOUBLE and cast the total back to DECIMAL(10,2):
    past 10 digits the cast failed the query (ANSI), and a DOUBLE loses cents past 2**53. It sums
    in DECIMAL(38,2) now, as the reference runtime sums Decimals: exactly."""
    from decimal import Decimal

    schema = "p INT, o BIGINT, at TIMESTAMP, user STRING, amount DECIMAL(10,2)"
    big = Decimal("99999999.99")
    rows = [(0, i, _at(i), "ann", v) for i, v in enumerate([big, big, big, Decimal("0.10"), Decimal("0.20")])]
    spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(tmp_path / "in" / "b0"))
    df = spark.readStream.schema(schema).option("recursiveFileLookup", "true").parquet(str(tmp_path / "in"))
    env = StreamExecutionEnvironment()
    sums = (env.from_source(DataFrameSource(df, partition="p", offset="o", timestamp="at"),
                            WatermarkStrategy.for_bounded_out_of_orderness(0))
            .key_by("user").window(TumblingEventTimeWindows.of(1000)).sum("amount")).collect()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, end_of_input=True).execute(env)  # type: ignore[arg-type]
    assert job.path == path
    assert [(r.key, r.value) for r in sums.results] == [("ann", Decimal("299999999.97") + Decimal("0.30"))]


def test_a_source_timestamp_on_the_keyed_path_runs_stage_a_in_python_with_the_source_s_fields(
        spark: Any, tmp_path: Path) -> None:
    """Without a field assigner the keyed path's stage A runs in Python on the executors, with the
    source pickled there without its DataFrame; its fields() read the DataFrame and failed every
    batch (AttributeError: 'str' object has no attribute 'columns'): a KafkaSource with record
    timestamps and a reduce, say."""
    df = _stream(spark, tmp_path / "in", [[(0, 0, _at(100), "ann", 1), (1, 0, _at(900), "ann", 2),
                                           (0, 1, _at(1_500), "bob", 4)]])
    env = StreamExecutionEnvironment()
    out = (env.from_source(DataFrameSource(df, partition="p", offset="o", timestamp="at"),
                           WatermarkStrategy.for_bounded_out_of_orderness(0))
           .key_by("user").window(TumblingEventTimeWindows.of(1000))
           .reduce(lambda a, b: {**a, "amount": a["amount"] + b["amount"]})).collect()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path="keyed", end_of_input=True).execute(env)
    assert job.path == "keyed"
    assert sorted((r.key, r.window_start - T0_MS, r.value["amount"]) for r in out.results) == [
        ("ann", 0, 3), ("bob", 1000, 4)]


@pytest.mark.parametrize("path", ["native", "keyed", "general"])
@pytest.mark.parametrize("aggregate", ["sum", "avg"])
def test_decimal_values_reach_a_dataframe_sink_as_every_path_types_them(
        spark: Any, tmp_path: Path, path: str, aggregate: str) -> None:
    """A DECIMAL(10,1) column's sum reaches a DataFrame sink as a DECIMAL(38,1) and its avg as the
    DOUBLE of the exact sum divided, on every path, and the other columns are typed alike too. The
    keyed path gave the sum as text (a STRING column) and the avg as a Decimal, as text too; the
    native path's avg summed DOUBLEs (ten 0.1 are 0.9999999999999999). Until session 37 the keyed
    and general paths' ``fire_index`` was a BIGINT, which a table the native path made refuses."""
    from decimal import Decimal

    from lowwater.spark.sinks import ForeachDataFrameSink

    schema = "p INT, o BIGINT, at TIMESTAMP, user STRING, amount DECIMAL(10,1)"
    rows = [(0, i, _at(i), "ann", Decimal("0.1")) for i in range(10)]
    spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(tmp_path / "in" / "b0"))
    spark.createDataFrame([(0, 10, _at(1500), "ann", Decimal("2.5"))], schema).coalesce(1).write.parquet(
        str(tmp_path / "in" / "b1"))
    df = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).option("recursiveFileLookup", "true")
          .parquet(str(tmp_path / "in")))
    seen: list[tuple[str, list[Any]]] = []
    columns: list[list[tuple[str, str]]] = []

    def keep(batch: Any, batch_id: int) -> None:
        seen.append((dict(batch.dtypes)["value"], sorted((r.window_start - T0_MS, r.value) for r in batch.collect())))
        columns.append([(c, t) for c, t in batch.dtypes if c != "value"])

    env = StreamExecutionEnvironment()
    out = getattr(env.from_source(DataFrameSource(df, partition="p", offset="o", timestamp="at"),
                                  WatermarkStrategy.for_bounded_out_of_orderness(0))
                  .key_by("user").window(TumblingEventTimeWindows.of(1000)), aggregate)("amount")
    out.add_sink(ForeachDataFrameSink(keep))
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, end_of_input=True).execute(env)  # type: ignore[arg-type]
    assert job.path == path
    fired = [(t, r) for t, rs in seen for r in rs]
    if aggregate == "sum":
        assert fired == [("decimal(38,1)", (0, Decimal("1.0"))), ("decimal(38,1)", (1000, Decimal("2.5")))]
    else:
        assert fired == [("double", (0, 0.1)), ("double", (1000, 2.5))]
    assert {tuple(c) for c in columns} == {(("key", "string"), ("window_start", "bigint"), ("window_end", "bigint"),
                                            ("fire_index", "int"), ("window", "struct<start:timestamp,end:timestamp>"))}


@pytest.mark.parametrize(("column", "keys", "typed"), [("INT", [1, 2], "int"),
                                                      ("BINARY", [b"\x00\xff", b"a"], "binary")])
def test_results_first_fired_at_the_end_of_input_are_typed_as_the_batches_type_them(
        spark: Any, tmp_path: Path, column: str, keys: list[Any], typed: str) -> None:
    """On the keyed path, windows that first fire in the end-of-input step, which has no batch, had
    their results typed by their values: an INT key a BIGINT column, a BINARY key the STRING of its
    base64 text, a value the row sinks did not get (a user probe, session 56)."""
    from lowwater.spark.sinks import ForeachDataFrameSink

    schema = f"p INT, o BIGINT, at TIMESTAMP, k {column}, amount BIGINT"
    rows = [(0, i, _at(10 * i), k, 1 + i) for i, k in enumerate(keys)]
    spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(tmp_path / "in"))
    df = spark.readStream.schema(schema).parquet(str(tmp_path / "in"))
    seen: list[tuple[str, list[Any]]] = []
    env = StreamExecutionEnvironment()
    (env.from_source(DataFrameSource(df, partition="p", offset="o", timestamp="at"),
                     WatermarkStrategy.for_bounded_out_of_orderness(0))
     .key_by("k").window(TumblingEventTimeWindows.of(1000)).sum("amount")
     .add_sink(ForeachDataFrameSink(lambda d, b: seen.append((dict(d.dtypes)["key"],
                                                              sorted((r.key, r.value) for r in d.collect()))))))
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path="keyed", end_of_input=True).execute(env)
    assert job.path == "keyed"
    assert [s for s in seen if s[1]] == [(typed, sorted((bytearray(k) if typed == "binary" else k, 1 + i)
                                                        for i, k in enumerate(keys)))]


@pytest.mark.parametrize("path", ["native", "keyed", "general"])
def test_a_timestamp_field_that_is_not_an_integer_or_a_float_dead_letters_every_element(
        spark: Any, tmp_path: Path, path: str) -> None:
    """The field assigner takes an integer or a float (``FieldTimestampAssigner``), on every path: a
    STRING, BOOLEAN or DECIMAL column gives no timestamp, and each element is a dead letter with the
    reference runtime's reason. The native path cast the column: ``"1714557600123"`` was a timestamp,
    ``True`` was 1 ms and a DECIMAL its number, each windowed without a word."""
    from decimal import Decimal

    schema = "p INT, o BIGINT, k STRING, tstr STRING, tbool BOOLEAN, tdec DECIMAL(15,0), amt BIGINT"
    rows = [(0, 0, "ann", "1714557600123", True, Decimal("1714557600123"), 1),
            (0, 1, "ann", "not a time", False, Decimal("1714557605000"), 2)]
    spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(tmp_path / "in" / "b0"))
    for field in ("tstr", "tbool", "tdec"):
        df = spark.readStream.schema(schema).option("recursiveFileLookup", "true").parquet(str(tmp_path / "in"))
        env = StreamExecutionEnvironment()
        out = (env.from_source(DataFrameSource(df, partition="p", offset="o"),
                               WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(field))
               .key_by("k").window(TumblingEventTimeWindows.of(1000)).sum("amt")).collect()
        dead = CollectSink()
        job = SparkRuntime(str(tmp_path / f"ck-{field}"), spark=spark, path=path, dead_letter_sink=dead,
                           end_of_input=True).execute(env)  # type: ignore[arg-type]
        assert job.path == path, job.reason
        assert out.results == [], (field, out.results)
        assert [(d["offset"], d["reason"]) for d in dead.results] == [
            (0, f"missing or non-numeric timestamp ({field})"), (1, f"missing or non-numeric timestamp ({field})")]
        assert str(job.accounting()) == "2 rows in = 0 windowed + 0 late + 2 dead-lettered", field


@pytest.mark.parametrize("path", ["native", "keyed", "general"])
def test_binary_map_struct_and_array_fields_reach_the_late_output_as_the_native_path_writes_them(
        spark: Any, tmp_path: Path, path: str) -> None:
    """A late element's BINARY, MAP, STRUCT and ARRAY fields are columns of the source's types with
    the element's values on every path. The keyed path's elements had a MAP as a list of pairs (an
    array of arrays in the output), the general path's a STRUCT as a ``Row`` (a tuple: an array of
    its values, the int as text), and both wrote bytes as their Python repr, ``"b'\\\\x03\\\\xff'"``."""
    from lowwater.spark.sinks import DirectorySink

    schema = ("p INT, o BIGINT, at TIMESTAMP, user STRING, bin BINARY, m MAP<STRING,INT>, "
              "st STRUCT<a: INT, b: STRING>, arr ARRAY<INT>, amount BIGINT")
    batches = [[(0, 0, _at(5000), "ann", bytes([1, 255]), {"k": 1}, (1, "s1"), [1, None], 1)],
               [(0, 1, _at(100), "ann", bytes([3, 255]), {"k": 3, "j": None}, (3, "s3"), [3], 2)]]  # late
    for i, rows in enumerate(batches):
        spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(tmp_path / "in" / f"b{i}"))
    df = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).option("recursiveFileLookup", "true")
          .option("pathGlobFilter", "*.parquet").parquet(str(tmp_path / "in")))
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    out = (env.from_source(DataFrameSource(df, partition="p", offset="o", timestamp="at"),
                           WatermarkStrategy.for_bounded_out_of_orderness(0))
           .key_by("user").window(TumblingEventTimeWindows.of(1000)).side_output_late_data(late).sum("amount"))
    out.get_side_output(late).add_sink(DirectorySink(tmp_path / "late", "parquet"))
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path,  # type: ignore[arg-type]
                       end_of_input=True).execute(env)
    assert job.path == path, job.reason
    got = spark.read.parquet(str(tmp_path / "late" / "batch=*"))
    types = dict(got.dtypes)
    assert [types[c] for c in ("bin", "m", "st", "arr")] == [
        "binary", "map<string,int>", "struct<a:int,b:string>", "array<int>"], got.dtypes
    assert [(bytes(r.bin), r.m, r.st.asDict(), r.arr) for r in got.collect()] == [
        (bytes([3, 255]), {"k": 3, "j": None}, {"a": 3, "b": "s3"}, [3])]


@pytest.mark.parametrize(("path", "frames"), [("native", True), ("keyed", True), ("general", True), ("keyed", False)])
def test_a_dead_letter_s_decimal_and_binary_fields_are_written_alike_on_every_path(
        spark: Any, tmp_path: Path, path: str, frames: bool) -> None:
    """A dead letter's ``record``, in a DataFrame sink's frame, is the native path's ``to_json`` of
    the element on every path: a DECIMAL a number with its places, a BINARY in base64. The keyed
    and general paths wrote ``"1.50"`` and bytes as their repr (``"b'\\\\x01\\\\xff'"``); a row-list
    sink on the keyed path got the same texts for the Decimal and the bytes it should have got."""
    from decimal import Decimal

    from lowwater.spark.sinks import ForeachDataFrameSink

    schema = "p INT, o BIGINT, ts BIGINT, user STRING, price DECIMAL(10,2), bin BINARY, amount BIGINT"
    rows = [(0, 0, 1000, None, Decimal("1.50"), bytes([1, 255]), 1), (0, 1, 2000, "ann", Decimal("0.00"), None, 2),
            (0, 2, 3000, "bob", Decimal("3.10"), None, None)]
    spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(tmp_path / "in" / "b0"))
    df = spark.readStream.schema(schema).option("recursiveFileLookup", "true").parquet(str(tmp_path / "in"))
    env = StreamExecutionEnvironment()
    (env.from_source(DataFrameSource(df, partition="p", offset="o"),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("user").window(TumblingEventTimeWindows.of(1000)).sum("amount").collect())
    got: list[Any] = []
    sink: Any = ForeachDataFrameSink(lambda d, _: got.extend(d.orderBy("offset").collect())) if frames \
        else CollectSink()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, dead_letter_sink=sink,  # type: ignore[arg-type]
                       end_of_input=True).execute(env)
    assert job.path == path, job.reason
    if frames:
        assert [(r["offset"], r["record"]) for r in got] == [
            (0, '{"p":0,"o":0,"ts":1000,"price":1.50,"bin":"Af8=","amount":1}'),
            (2, '{"p":0,"o":2,"ts":3000,"user":"bob","price":3.10}')]
    else:
        assert [d["record"] for d in sink.results] == [
            {"p": 0, "o": 0, "ts": 1000, "user": None, "price": Decimal("1.50"), "bin": bytes([1, 255]), "amount": 1},
            {"p": 0, "o": 2, "ts": 3000, "user": "bob", "price": Decimal("3.10"), "bin": None, "amount": None}]


def test_a_checkpoint_is_bound_to_its_dataframes_column_types(spark: Any, tmp_path: Path) -> None:
    """``amount BIGINT`` read as ``DOUBLE`` on a restart was taken: only declared ``value_fields``
    bound a checkpoint to types, and a DataFrameSource has none. The windows the first run had left
    open lost what it had put in them (ann's 5 and bob's 7 of minute 0: 2.5 and no value), and the
    accounting balanced (a user probe, session 54). The second run is refused before a batch."""
    _stream(spark, tmp_path / "in", [[(0, 0, _at(5_000), "ann", 5), (1, 0, _at(10_000), "bob", 7)]])

    def run(amount: str) -> Any:
        schema = SCHEMA.replace("amount BIGINT", f"amount {amount}")
        df = spark.readStream.schema(schema).option("recursiveFileLookup", "true").option(
            "pathGlobFilter", "*.parquet").parquet(str(tmp_path / "in"))
        env = StreamExecutionEnvironment()
        (env.from_source(DataFrameSource(df, partition="p", offset="o", timestamp="at"),
                         WatermarkStrategy.for_bounded_out_of_orderness(0))
         .key_by("user").window(TumblingEventTimeWindows.of(60_000)).sum("amount").collect())
        assert env.pipeline().fingerprint()["field_types"]["000"]["amount"] == amount
        return SparkRuntime(str(tmp_path / "ck"), spark=spark).execute(env)  # minute 0 stays open

    run("BIGINT")
    with pytest.raises(ConfigurationError, match=r"belongs to a different pipeline \(field 'amount' was BIGINT, "
                                                 r"now DOUBLE"):
        run("DOUBLE")


def test_a_malformed_json_line_is_a_counted_dead_letter_that_can_keep_its_text(spark: Any, tmp_path: Path) -> None:
    """Spark's JSON source gives a malformed line (and a field of another type) as nulls; with the
    partition mapped, the row is a dead letter for what it lacks, and Spark's corrupt-record column,
    named without a leading ``_``, keeps the line's text in it (docs/reliability.md)."""
    from pyspark.sql import functions as F

    (tmp_path / "in").mkdir()
    bad = '{"user":"bob", oops'
    (tmp_path / "in" / "f0.json").write_text('{"user":"ann","ts":"2024-01-01T00:00:05Z","amount":5,"p":0}\n' + bad +
                                             '\n{"user":"cy","ts":"2024-01-01T00:00:06Z","amount":"x","p":0}\n')
    df = (spark.readStream.schema("user STRING, ts TIMESTAMP, amount BIGINT, p INT, corrupt STRING")
          .option("columnNameOfCorruptRecord", "corrupt").json(str(tmp_path / "in")))
    env = StreamExecutionEnvironment()
    source = DataFrameSource(df.withColumn("p", F.coalesce("p", F.lit(0))), partition="p", timestamp="ts")
    out = (env.from_source(source, WatermarkStrategy.for_bounded_out_of_orderness(0))
           .key_by("user").window(TumblingEventTimeWindows.of(60_000)).sum("amount").collect())
    dead = CollectSink()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, dead_letter_sink=dead, end_of_input=True).execute(env)
    assert [(r.key, r.value) for r in out.results] == [("ann", 5)]
    # with the source's timestamp the window judges the key first, as on the reference runtime
    assert sorted((d["reason"], d["record"]["corrupt"]) for d in dead.results) == [
        ("missing key (user)", bad),
        ("missing value (amount)", '{"user":"cy","ts":"2024-01-01T00:00:06Z","amount":"x","p":0}')]
    assert str(job.accounting()) == "3 rows in = 1 windowed + 0 late + 2 dead-lettered"


def test_a_map_key_is_refused_on_every_path_and_an_array_or_struct_key_where_python_keys(
        spark: Any, tmp_path: Path) -> None:
    """Spark's grouping takes ``{b: null}`` and ``{b: 0}`` as one key: the native path summed two
    keys' windows as one, the accounting balanced. The keyed and general paths key in Python, and
    failed at the first record of a MAP, ARRAY or STRUCT key (``unhashable type: 'list'``), blaming
    a user function and asking to fix it (a user probe, session 56). Both are refused before the
    query starts, naming the column and its type."""
    schema = "p INT, o BIGINT, at TIMESTAMP, k MAP<STRING,INT>, karr ARRAY<INT>, kst STRUCT<a:INT>, amount BIGINT"
    spark.createDataFrame([(0, 0, _at(0), {"b": None}, [1], {"a": 1}, 1)], schema).write.parquet(str(tmp_path / "in"))

    def run(key: str, path: str) -> None:
        df = spark.readStream.schema(schema).parquet(str(tmp_path / "in"))
        env = StreamExecutionEnvironment()
        (env.from_source(DataFrameSource(df, partition="p", offset="o", timestamp="at"),
                         WatermarkStrategy.for_bounded_out_of_orderness(0))
         .key_by(key).window(TumblingEventTimeWindows.of(1000)).sum("amount").add_sink(CollectSink()))
        SparkRuntime(str(tmp_path / f"ck-{key}-{path}"), spark=spark, path=path, end_of_input=True).execute(env)

    for path in ("auto", "native", "keyed", "general"):
        with pytest.raises(ConfigurationError, match=r"key_by\(\"k\"\) keys by 'k', a MAP<STRING,INT> column: Spark "
                                                     r"groups maps with a null value and with 0 as one key"):
            run("k", path)
    for key, kind in (("karr", "ARRAY<INT>"), ("kst", "STRUCT<A:INT>")):
        for path in ("keyed", "general"):
            with pytest.raises(ConfigurationError, match=rf"keys by '{key}', a {kind} column, and this pipeline "
                                                         rf"takes the {path} path, which keys in Python"):
                run(key, path)
    assert not list(tmp_path.glob("ck-*/lowwater/pipeline.json")), "refused before the checkpoint is written"


def _typed_seconds(element: dict[str, Any], previous: int) -> int:
    """A Python assigner that takes an element's time from the seconds in its STRUCT, and fails
    (naming what it got) unless each field is the Python type the keyed and general paths give."""
    kinds = {"bin": bytes, "m": dict, "st": dict, "arr": list, "at": int, "amount": int}
    wrong = {k: type(element[k]).__name__ for k, t in kinds.items() if type(element[k]) is not t}
    if wrong:
        raise TypeError(f"fields of unexpected types: {wrong}")
    return element["st"]["sec"] * 1000 + len(element["arr"]) + element["m"]["k"]


@pytest.mark.parametrize("path", ["executor", "keyed", "general"])
def test_a_python_assigner_gets_the_same_element_on_every_path_that_runs_one(
        spark: Any, tmp_path: Path, path: str) -> None:
    """On the executor path the element had crossed pandas: an ARRAY was a numpy array and a
    BINARY or a MAP whatever pandas made of it, where the keyed and general paths give a list,
    bytes and a dict (Arrow's ``to_pylist``). Now the executor path reads Arrow too (session 64)."""
    schema = ("p INT, o BIGINT, at TIMESTAMP, user STRING, bin BINARY, m MAP<STRING,INT>, "
              "st STRUCT<sec: BIGINT>, arr ARRAY<INT>, amount BIGINT")
    rows = [(0, 0, _at(0), "ann", bytes([1]), {"k": 0}, (1,), [1, None], 1),      # 1000 + 2 + 0
            (0, 1, _at(0), "ann", bytes([2]), {"k": 5}, (2,), [], 2),             # 2000 + 0 + 5
            (1, 0, _at(0), "bob", bytes([3]), {"k": 1, "j": None}, (1,), [7], 4)]  # 1000 + 1 + 1
    spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(tmp_path / "in" / "b0"))
    df = spark.readStream.schema(schema).option("recursiveFileLookup", "true").parquet(str(tmp_path / "in"))
    env = StreamExecutionEnvironment()
    results = (env.from_source(DataFrameSource(df, partition="p", offset="o"),
                               WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(_typed_seconds))
               .key_by("user").window(TumblingEventTimeWindows.of(1000)).sum("amount")).collect()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path,  # type: ignore[arg-type]
                       end_of_input=True).execute(env)
    assert job.path == path, job.reason
    assert sorted((r.key, r.window_start, r.value) for r in results.results) == [
        ("ann", 1000, 1), ("ann", 2000, 2), ("bob", 1000, 4)]


@pytest.mark.parametrize("path", ["native", "keyed"])
def test_an_avg_of_bigints_past_2_53_is_the_float_of_their_exact_sum_on_every_path(
        spark: Any, tmp_path: Path, path: str) -> None:
    """The native path's avg of a BIGINT summed DOUBLEs: 2**53 + 1 and 1 averaged to 2**52 there and to
    2**52 + 1 on the other paths (a user probe, session 65). Every path now divides the float of the
    exact sum, on time and when an allowed late element re-fires the window."""
    df = _stream(spark, tmp_path / "in", [
        [(0, 0, _at(100), "ann", 2**53 + 1), (0, 1, _at(200), "ann", 1), (0, 2, _at(300), "bob", 2**54),
         (0, 3, _at(400), "bob", 2), (0, 4, _at(2_000), "cid", 0)],
        [(0, 5, _at(500), "bob", 1)]])  # late, within the allowed lateness: re-fires bob's window
    env = StreamExecutionEnvironment()
    avgs = (env.from_source(DataFrameSource(df, partition="p", offset="o", timestamp="at"),
                            WatermarkStrategy.for_bounded_out_of_orderness(0))
            .key_by("user").window(TumblingEventTimeWindows.of(1000)).allowed_lateness("10 s").avg("amount")).collect()
    job = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, end_of_input=True).execute(env)  # type: ignore[arg-type]
    assert job.path == path
    got = sorted((r.key, r.fire_index, r.value) for r in avgs.results if r.key != "cid")
    assert got == [("ann", 0, float(2**53 + 2) / 2), ("bob", 0, float(2**54 + 2) / 2), ("bob", 1, float(2**54 + 3) / 3)]
    assert got[0][2] == 2**52 + 1 and got[2][2] == 6004799503160663.0


@pytest.mark.parametrize("path", ["native", "keyed"])
def test_a_decimal_sum_past_38_digits_is_exact_off_the_native_path_and_said_on_it(
        spark: Any, tmp_path: Path, path: str) -> None:
    """Two DECIMAL(38,18) values whose sum needs 39 digits. The native path's query failed with
    Spark's ``[ARITHMETIC_OVERFLOW]`` and its hint (``try_sum``, ``spark.sql.ansi.enabled``), which a
    lowwater user cannot take; it now says which field passed what, and what to do. The keyed path,
    which sums in Python, gives the exact total, as Flink's BigDecimal sum does (a user probe,
    session 65; until then it was rounded to 28 digits)."""
    from decimal import Decimal

    from lowwater.core.errors import QueryFailedError

    schema = "p INT, o BIGINT, at TIMESTAMP, user STRING, amount DECIMAL(38,18)"
    big = Decimal("60000000000000000000.000000000000000001")
    spark.createDataFrame([(0, 0, _at(100), "ann", big), (0, 1, _at(200), "ann", big)], schema) \
        .coalesce(1).write.parquet(str(tmp_path / "in" / "b0"))
    df = spark.readStream.schema(schema).option("recursiveFileLookup", "true").parquet(str(tmp_path / "in"))
    env = StreamExecutionEnvironment()
    sums = (env.from_source(DataFrameSource(df, partition="p", offset="o", timestamp="at"),
                            WatermarkStrategy.for_bounded_out_of_orderness(0))
            .key_by("user").window(TumblingEventTimeWindows.of(1000)).sum("amount")).collect()
    runtime = SparkRuntime(str(tmp_path / "ck"), spark=spark, path=path, end_of_input=True)  # type: ignore[arg-type]
    if path == "keyed":
        runtime.execute(env)
        exact = Decimal("120000000000000000000.000000000000000002")
        assert [(r.key, r.value) for r in sums.results] == [("ann", exact)]
        return
    with pytest.raises(QueryFailedError) as failed:
        runtime.execute(env)
    said = str(failed.value)
    assert "the sum of the DECIMAL field 'amount' in a window passed DECIMAL(38,s)" in said, said
    assert "try_sum" not in said.split("hint:")[0], said
