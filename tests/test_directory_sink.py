"""DirectorySink's rows from the reference runtime: a directory per batch, or only per batch with rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lowwater.core.windows import WindowResult
from lowwater.spark.sinks import DirectorySink


def test_a_directory_per_batch_or_only_for_batches_with_rows(tmp_path: Path) -> None:
    every, fired = DirectorySink(tmp_path / "every", "jsonl"), DirectorySink(tmp_path / "fired", "jsonl",
                                                                              empty_batches=False)
    for sink in (every, fired):
        sink.write_batch(0, [])
        sink.write_batch(1, [WindowResult("a", 0, 10, 3, 0)])
        sink.write_batch(2, [])
    assert sorted(p.name for p in (tmp_path / "every").iterdir()) == ["batch=0", "batch=1", "batch=2"]
    assert sorted(p.name for p in (tmp_path / "fired").iterdir()) == ["batch=1"]
    rows = [json.loads(x) for x in (tmp_path / "fired" / "batch=1" / "part.jsonl").read_text().splitlines()]
    assert [(r["key"], r["window_start"], r["value"]) for r in rows] == [("a", 0, 3)]


def test_a_parquet_batch_keeps_every_row_s_fields_not_only_the_first_row_s(tmp_path: Path) -> None:
    """pyarrow's from_pylist names the columns after the first row: a dead letter's ``file``, which
    only a record that does not parse has, vanished when a rejected record came first."""
    from lowwater.spark.sinks import read_directory

    letters = [{"reason": "missing key (key)", "partition": 0, "offset": 2, "record": {"key": None, "ts": 6000}},
               {"reason": "record does not parse: 'x'", "partition": 0, "offset": 6, "record": None,
                "file": "/log/partition=0/segment-0.jsonl"}]
    DirectorySink(tmp_path / "dead", "parquet").write_batch(0, letters)
    DirectorySink(tmp_path / "out", "parquet").write_batch(0, [5, {"user": "a", "total": 7}])
    dead, out = read_directory(tmp_path / "dead"), read_directory(tmp_path / "out")
    assert [d.get("file") for d in dead] == [None, "/log/partition=0/segment-0.jsonl"]
    assert [d["offset"] for d in dead] == [2, 6]
    assert out == [{"value": 5, "user": None, "total": None}, {"value": None, "user": "a", "total": 7}]


def test_parquet_batches_keep_their_columns_types_and_a_change_of_type_fails_naming_the_field(tmp_path: Path) -> None:
    """Each Parquet batch has the columns of the batches before it (the reference runtime's and the
    general path's rows; the keyed path's DataFrames keep theirs the same way): a field with only
    nulls or empty lists so far, in a struct too, is no column yet; a DOUBLE column takes integers,
    a STRING column any scalar; a replay keeps the schema of the batches before it, not its own
    first attempt's; any other change of type fails, naming the field, before the batch is written."""
    import pyarrow.parquet as pq
    import pytest

    from lowwater.core.errors import OutputSchemaError

    sink = DirectorySink(tmp_path / "out", "parquet")

    def schema(batch: int) -> dict[str, str]:
        return {f.name: str(f.type) for f in pq.read_schema(tmp_path / "out" / f"batch={batch}" / "part.parquet")}

    sink.write_batch(0, [{"k": "a", "x": 0.5, "n": None, "s": {"p": None, "q": 1}, "l": [], "t": "u"}])
    assert schema(0) == {"k": "string", "x": "double", "s": "struct<q: int64>", "t": "string"}
    sink.write_batch(1, [])
    sink.write_batch(2, [{"k": "b", "x": 2, "n": 7, "s": {"p": "v", "q": 2}, "l": [1], "t": 5}])
    assert schema(2) == {"k": "string", "x": "double", "s": "struct<q: int64, p: string>", "t": "string", "n": "int64",
                         "l": "list<element: int64>"}
    assert pq.read_table(tmp_path / "out" / "batch=2" / "part.parquet").to_pylist() == [
        {"k": "b", "x": 2.0, "s": {"q": 2, "p": "v"}, "t": "5", "n": 7, "l": [1]}]
    sink.write_batch(3, [{"k": "c", "z": 1}])
    assert schema(3) == {**schema(2), "z": "int64"}
    sink.write_batch(3, [{"k": "c", "z": "w"}])  # a replay: its first attempt's z is not a kept column
    assert schema(3) == {**schema(2), "z": "string"}
    with pytest.raises(OutputSchemaError, match=r"in batch 4 the field n holds DOUBLE values, where earlier "
                                                r"batches made it a BIGINT column"):
        sink.write_batch(4, [{"k": "d", "n": 1.5}])
    with pytest.raises(OutputSchemaError, match=r"the field s\.q holds STRING"):
        sink.write_batch(4, [{"k": "d", "s": {"q": "text"}}])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"batch={b}" for b in range(4)]  # no .tmp


def test_a_parquet_batch_whose_field_holds_values_of_two_kinds_writes_their_json_texts(tmp_path: Path) -> None:
    """No one Arrow type holds a number and a word: pyarrow raised ArrowInvalid and the batch
    failed. Spark's JSON inference reads such a field as STRING on the keyed path; so does this
    sink, each value's JSON text (a string as it is), and the STRING column stays one after."""
    import pyarrow.parquet as pq

    from lowwater.spark.sinks import read_directory

    sink = DirectorySink(tmp_path / "out", "parquet")
    sink.write_batch(0, [{"status": 1, "flag": True, "big": 2**70, "detail": {"n": 1}},
                         {"status": "error", "flag": 0, "big": 3, "detail": "none"}])
    sink.write_batch(1, [{"status": 2, "flag": "yes", "big": 4, "detail": {"n": 2}}])
    assert {f.name: str(f.type) for f in pq.read_schema(tmp_path / "out" / "batch=0" / "part.parquet")} == {
        "status": "string", "flag": "string", "big": "string", "detail": "string"}
    assert read_directory(tmp_path / "out") == [
        {"status": "1", "flag": "true", "big": str(2**70), "detail": '{"n":1}'},
        {"status": "error", "flag": "0", "big": "3", "detail": "none"},
        {"status": "2", "flag": "yes", "big": "4", "detail": '{"n":2}'},
    ]


def test_parquet_batches_of_decimals_keep_one_decimal_column_as_totals_grow(tmp_path: Path) -> None:
    """Arrow types a batch's Decimals by their digits (1.50 and 2.25: decimal128(3, 2)), so the
    general path's DECIMAL sums failed the next batch whose total had more digits. Decimals are a
    DECIMAL(38, places) column, as on the keyed path; integers beside them and fewer places fit;
    more places would be rounded, and fail naming the field."""
    from decimal import Decimal

    import pyarrow.parquet as pq
    import pytest

    from lowwater.core.errors import OutputSchemaError
    from lowwater.spark.sinks import read_directory

    sink = DirectorySink(tmp_path / "out", "parquet")
    sink.write_batch(0, [{"k": "a", "v": Decimal("1.50"), "l": [Decimal("0.5")]}, {"k": "b", "v": 3, "l": []}])
    sink.write_batch(1, [{"k": "c", "v": Decimal("123456789012.1"), "l": [2]}])
    assert str(pq.read_schema(tmp_path / "out" / "batch=1" / "part.parquet").field("v").type) == "decimal128(38, 2)"
    assert read_directory(tmp_path / "out") == [
        {"k": "a", "v": Decimal("1.50"), "l": [Decimal("0.5")]}, {"k": "b", "v": Decimal("3.00"), "l": []},
        {"k": "c", "v": Decimal("123456789012.10"), "l": [Decimal("2.0")]}]
    with pytest.raises(OutputSchemaError, match=r"the field v holds DECIMAL\(38,3\) values, where earlier batches "
                                                r"made it a DECIMAL\(38,2\) column.*Decimal\.quantize"):
        sink.write_batch(2, [{"k": "d", "v": Decimal("0.125")}])


def test_window_results_get_spark_s_window_struct_in_parquet_and_json_lines(tmp_path: Path) -> None:
    """As the Spark paths write them: ``window`` (``start``, ``end`` TIMESTAMPs in UTC) after the
    result's fields; a bound past Python's dates is null. Until session 37 the reference runtime's
    files had no ``window`` column, so its output and a Spark run's could not be read as one table."""
    import datetime as dt

    import pyarrow.parquet as pq

    from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP

    rows = [WindowResult("a", 1_714_557_600_000, 1_714_557_660_500, 3, 0), WindowResult("g", MIN_TIMESTAMP,
                                                                                         MAX_TIMESTAMP, 1, 0)]
    DirectorySink(tmp_path / "p", "parquet").write_batch(0, rows)
    DirectorySink(tmp_path / "j", "jsonl").write_batch(0, rows)
    table = pq.read_table(tmp_path / "p" / "batch=0" / "part.parquet")
    assert table.column_names == ["key", "window_start", "window_end", "value", "fire_index", "window"]
    assert str(table.schema.field("window").type) == "struct<start: timestamp[us, tz=UTC], end: timestamp[us, tz=UTC]>"
    utc = dt.timezone.utc
    assert table.column("window").to_pylist() == [
        {"start": dt.datetime(2024, 5, 1, 10, 0, tzinfo=utc),
         "end": dt.datetime(2024, 5, 1, 10, 1, 0, 500_000, tzinfo=utc)},
        {"start": None, "end": None}]
    lines = [json.loads(x) for x in (tmp_path / "j" / "batch=0" / "part.jsonl").read_text().splitlines()]
    assert [x["window"] for x in lines] == [
        {"start": "2024-05-01T10:00:00.000Z", "end": "2024-05-01T10:01:00.500Z"}, {}]


def test_a_window_result_s_fire_index_is_an_int_column_as_on_spark(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    sink = DirectorySink(tmp_path / "p", "parquet")
    sink.write_batch(0, [WindowResult("a", 0, 10, 3, 0)])
    sink.write_batch(1, [WindowResult("a", 0, 10, 4, 1)])
    for b in (0, 1):
        assert str(pq.read_schema(tmp_path / "p" / f"batch={b}" / "part.parquet").field("fire_index").type) == "int32"
    DirectorySink(tmp_path / "d", "parquet").write_batch(0, [{"fire_index": 2}])  # not a window result: as it is
    assert str(pq.read_schema(tmp_path / "d" / "batch=0" / "part.parquet").field("fire_index").type) == "int64"


def test_a_path_that_is_a_file_is_refused_before_the_run(tmp_path: Path) -> None:
    """It failed at the first batch with a raw Errno: ``[Errno 17] File exists`` on the reference
    runtime, ``[Errno 20] Not a directory: '.../_lowwater_job'`` on Spark."""
    import pytest

    from lowwater.api import StreamExecutionEnvironment
    from lowwater.core.errors import ConfigurationError
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.graph.sources import CollectionSource

    (tmp_path / "out").write_text("")
    env = StreamExecutionEnvironment()
    (env.from_source(CollectionSource([[{"k": "a", "ts": 1}]]),
                     WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts"))
     .key_by("k").window(TumblingEventTimeWindows.of(10)).count().add_sink(DirectorySink(tmp_path / "out")))
    with pytest.raises(ConfigurationError, match="out is a file, not a directory: a DirectorySink writes"):
        env.execute()
    sink = DirectorySink(tmp_path / "out")
    with pytest.raises(ConfigurationError, match="is a file, not a directory"):
        sink.bind_job("a-job-id", resumes=True)  # as on Spark, where a job resumes
    # a path under a file: a bare NotADirectoryError at the job marker's write (a user probe, session 53)
    for resumes in (True, False):
        with pytest.raises(ConfigurationError, match=r"out/sub/dir is under .*out, a file, not a directory"):
            DirectorySink(tmp_path / "out" / "sub" / "dir").bind_job("a-job-id", resumes=resumes)


def test_the_reference_runtime_writes_partitions_decimals_and_infinities_as_spark_does(tmp_path: Path) -> None:
    """A late row's partition was a BIGINT (an INT on Spark), a Decimal sum a JSON string ("3.35"),
    and an infinite float bare ``Infinity``, which is no JSON (Spark writes the string)."""
    from decimal import Decimal

    import pyarrow.parquet as pq

    from lowwater.api import OutputTag, StreamExecutionEnvironment
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.graph.sources import CollectionSource

    batches = [[{"k": "a", "ts": 100, "d": Decimal("1.10"), "f": 1e308},
                {"k": "a", "ts": 200, "d": Decimal("2.25"), "f": 1e308}],
               [{"k": "a", "ts": 5000, "d": Decimal("1.00"), "f": 1.0}],
               [{"k": "a", "ts": 300, "d": Decimal("9.99"), "f": 1.0}]]  # late
    for field in ("d", "f"):
        env = StreamExecutionEnvironment()
        late = OutputTag("late")
        sums = (env.from_source(CollectionSource(batches), WatermarkStrategy.for_bounded_out_of_orderness(0)
                                .with_timestamp_assigner("ts"))
                .key_by("k").window(TumblingEventTimeWindows.of(1000)).side_output_late_data(late).sum(field))
        sums.add_sink(DirectorySink(tmp_path / field / "main", "jsonl"))
        sums.get_side_output(late).add_sink(DirectorySink(tmp_path / field / "late", "parquet"))
        env.execute()
        lines = [x for f in sorted((tmp_path / field / "main").rglob("part.jsonl")) for x in f.read_text().split()]
        assert any(('"value":3.35,' if field == "d" else '"value":"Infinity",') in x for x in lines), lines
        schema = pq.read_schema(next((tmp_path / field / "late").rglob("*.parquet")))
        assert str(schema.field("partition").type) == "int32"


def test_the_format_may_be_given_as_spark_spells_it(tmp_path: Path) -> None:
    """``DirectorySink(path, format="json")``, as in ``df.write.format("json")``, raised a
    TypeError: the parameter is ``fmt``."""
    import pytest

    from lowwater.core.errors import ConfigurationError

    sink = DirectorySink(tmp_path / "out", format="json")
    assert sink.fmt == "json"
    sink.write_batch(0, [{"k": "a", "n": 1}])
    assert [json.loads(x) for x in (tmp_path / "out" / "batch=0" / "part.jsonl").read_text().splitlines()] == [
        {"k": "a", "n": 1}]
    assert DirectorySink(tmp_path / "o2", "orc", format="orc").fmt == "orc"
    with pytest.raises(ConfigurationError, match="given twice: fmt='orc' and format='json'"):
        DirectorySink(tmp_path / "o3", "orc", format="json")
    with pytest.raises(ConfigurationError, match="must be one of"):
        DirectorySink(tmp_path / "o4", format="csv")  # type: ignore[arg-type]
    # an explicit "parquet" is a format too (it was taken for the default, and JSON was written)
    with pytest.raises(ConfigurationError, match="given twice: fmt='parquet' and format='json'"):
        DirectorySink(tmp_path / "o5", "parquet", format="json")
    assert DirectorySink(tmp_path / "o6", "jsonl", format="json").fmt == "jsonl", "one format, two names"
    assert DirectorySink(tmp_path / "o7").fmt == "parquet"
    with pytest.raises(ConfigurationError, match="must be one of"):
        DirectorySink(tmp_path / "o8", "")  # type: ignore[arg-type]  # not taken for "no format given"


def test_a_reference_run_refuses_a_directory_an_earlier_run_wrote(tmp_path: Path) -> None:
    """Each reference run is a new job, as a Spark job on a new checkpoint: a second run rewrote
    ``batch=0..k`` and kept the first run's later batches beside them, both runs' rows read back
    as one result, without a word."""
    import pytest

    from lowwater.api import StreamExecutionEnvironment
    from lowwater.core.errors import ConfigurationError
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.io import PartitionedLogWriter
    from lowwater.spark.sinks import read_directory
    from lowwater.spark.sources import PartitionedLogSource

    PartitionedLogWriter(tmp_path / "log").append(0, [
        {"user": u, "ts": ts, "amount": a}
        for u, ts, a in [("ann", 1000, 1), ("bob", 2000, 2), ("ann", 70_000, 3), ("bob", 130_000, 4)]])

    def run(records_per_batch: int) -> None:
        env = StreamExecutionEnvironment()
        (env.from_source(PartitionedLogSource(tmp_path / "log", [("user", "STRING"), ("ts", "BIGINT"),
                                                                  ("amount", "BIGINT")],
                                              records_per_batch=records_per_batch),
                         WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts"))
         .key_by("user").window(TumblingEventTimeWindows.of("1 minute")).sum("amount")
         .add_sink(DirectorySink(tmp_path / "out", "jsonl")))
        env.execute()

    run(1)  # batches 0..4
    first = sorted((r["key"], r["window_start"], r["value"]) for r in read_directory(tmp_path / "out"))
    assert first == [("ann", 0, 1), ("ann", 60_000, 3), ("bob", 0, 2), ("bob", 120_000, 4)]
    with pytest.raises(ConfigurationError, match="holds the batches of another job"):
        run(1000)  # batches 0..1: the first run's batches 2..4 would have stayed beside them
    assert sorted((r["key"], r["window_start"], r["value"]) for r in read_directory(tmp_path / "out")) == first


def test_a_new_job_refuses_a_directory_of_another_writers_files(tmp_path: Path) -> None:
    """A Spark job's part files in the directory (a job being ported to lowwater, pointed at its old
    output): lowwater wrote ``batch=<id>/`` beside them, and a reader of the directory then read
    lowwater's rows alone, the old ones hidden by partition discovery, without a word (a user probe,
    session 58). Hidden files (``_SUCCESS``, ``.crc``) are readers' and do not count."""
    import pytest

    from lowwater.api import CollectionSource, StreamExecutionEnvironment
    from lowwater.core.errors import ConfigurationError
    from lowwater.core.watermarks import WatermarkStrategy

    def run(out: Path) -> None:
        env = StreamExecutionEnvironment()
        (env.from_source(CollectionSource([[{"key": "a", "ts": 1000, "value": 1}]]),
                         WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts"))
         .key_by("key").time_window(1000).sum("value").add_sink(DirectorySink(out, "jsonl")))
        env.execute()

    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "part-00000-1b2c.snappy.parquet").write_bytes(b"PAR1")
    with pytest.raises(ConfigurationError, match=r"holds files another writer made \(part-00000-1b2c.snappy.parquet\)"):
        run(tmp_path / "theirs")
    assert sorted(p.name for p in (tmp_path / "theirs").iterdir()) == ["part-00000-1b2c.snappy.parquet"]
    (tmp_path / "hidden").mkdir()
    for name in ("_SUCCESS", ".part-00000.crc"):
        (tmp_path / "hidden" / name).write_bytes(b"")
    run(tmp_path / "hidden")
    assert (tmp_path / "hidden" / "batch=0").is_dir()


MIXED = [{"value": ("a", 1, 0.5, None), "detail": {"n": 1, "m": "x"}},
         {"value": ("b", 2, 1.0, "even"), "detail": {"n": "none"}},
         {"value": None, "detail": None}]
SPARK_READS_MIXED = [{"value": ["a", "1", "0.5", None], "detail": {"n": "1", "m": "x"}},
                     {"value": ["b", "2", "1.0", "even"], "detail": {"n": "none", "m": None}},
                     {"value": None, "detail": None}]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_a_field_whose_kinds_part_inside_a_list_or_object_is_typed_there_as_spark_types_it(
        tmp_path: Path, fmt: str) -> None:
    """A PyFlink-style tuple of a word and numbers (a process function's ``yield (key, v, v / 2)``),
    and an object whose field is a number in one row and a word in another. The keyed and general
    paths write what Spark's JSON inference reads: a list of the elements' texts, a struct with that
    field a STRING (``tests/spark/test_json_rows.py`` checks it against Spark). The reference runtime
    wrote the whole tuple as one JSON text in Parquet, and the tuple as it was in JSON lines: the same
    job's files read back three ways (a user probe, session 59)."""
    import pyarrow.parquet as pq

    from lowwater.spark.sinks import read_directory

    sink = DirectorySink(tmp_path / "out", fmt)
    sink.write_batch(0, MIXED)
    if fmt == "parquet":
        assert {f.name: str(f.type) for f in pq.read_schema(tmp_path / "out" / "batch=0" / "part.parquet")} == {
            "value": "list<element: string>", "detail": "struct<n: string, m: string>"}
    rows = read_directory(tmp_path / "out")
    if fmt == "jsonl":  # a JSON line leaves a null out where Parquet has one
        rows = [r if r["detail"] is None else {**r, "detail": {"m": None, **r["detail"]}} for r in rows]
    assert rows == SPARK_READS_MIXED


def test_a_json_lines_field_of_values_json_has_no_kind_for_is_written_as_before(tmp_path: Path) -> None:
    """The settling of mixed kinds leaves alone a field whose values are objects JSON has no kind for:
    each is its text, as ``spark_json`` writes it, not that text quoted once more."""
    from lowwater.spark.sinks import read_directory

    class Colour:
        def __str__(self) -> str:
            return "red"

    sink = DirectorySink(tmp_path / "out", "jsonl")
    sink.write_batch(0, [{"c": Colour(), "n": 1}, {"c": "blue", "n": "x"}])
    assert read_directory(tmp_path / "out") == [{"c": "red", "n": "1"}, {"c": "blue", "n": "x"}]
