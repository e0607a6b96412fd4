"""The keyed path's JSON rows as DataFrames: a schema Spark inferred is kept per set of shapes.

The claim :mod:`lowwater.spark.json_rows` rests on is checked against Spark itself: batches of
random documents whose sets of shapes are equal infer equal schemas, and a batch parsed with a
kept schema is the DataFrame Spark's own ``read.json`` makes of it.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import random
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from lowwater.core.windows.events import WindowResult
from lowwater.spark.json_rows import MAX_SHAPES, JsonFrames, document, json_row, merge_shapes, reported, shape, to_json

NAMES = ("a", "b", "B", "value", "x y", 'q"t', "1")


class Colour(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Point:
    x: Any
    y: Any


def _scalar(rng: random.Random, kind: str) -> Any:
    """A value of one of the kinds Spark's inference tells apart, drawn anew each call."""
    if kind == "int":
        return rng.choice([0, -1, 7, 2**63 - 1, -(2**63), rng.randrange(-(10**12), 10**12)])
    if kind == "big":  # beyond a long: a DECIMAL of its digits (20 here), or a DOUBLE past 38
        return rng.choice([1, -1]) * rng.randrange(10**19, 10**20)
    if kind == "huge":
        return rng.randrange(10**40, 10**41)
    if kind == "float":
        return rng.choice([0.5, -1e300, 1e16, float("nan"), float("inf"), rng.random()])
    if kind == "str":
        return rng.choice(["x", "ünï☃", '{"a": 1}', "2024-01-01T00:00:00Z", "12", "1.5", "true"])
    if kind == "empty":  # read as a null by Spark's inference: beside a number, the field is a number
        return ""
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "none":
        return None
    if kind == "enum":  # not JSON: the encoder's default writes str(o)
        return Colour.RED
    if kind == "intenum":  # an int: written as one
        return Level.HIGH
    return Decimal("1.25")  # not JSON either: text


KINDS = ("int", "big", "huge", "float", "str", "empty", "bool", "none", "enum", "intenum", "decimal")


def _skeleton(rng: random.Random, depth: int = 0) -> Any:
    """A document's structure, its leaves kinds of value (:func:`_fill` draws the values)."""
    r = rng.random()
    if depth >= 3 or r < 0.5:
        return ("leaf", rng.choice(KINDS))
    if r < 0.7:
        return ("list", [_skeleton(rng, depth + 1) for _ in range(rng.randrange(0, 3))])
    if r < 0.8:
        return ("point", _skeleton(rng, depth + 1), _skeleton(rng, depth + 1))
    names = rng.sample(NAMES, rng.randrange(0, 4))
    return ("dict", {n: _skeleton(rng, depth + 1) for n in names})


def _fill(rng: random.Random, sk: Any) -> Any:
    if sk[0] == "leaf":
        return _scalar(rng, sk[1])
    if sk[0] == "list":
        return [_fill(rng, s) for s in sk[1]]
    if sk[0] == "point":
        return Point(_fill(rng, sk[1]), _fill(rng, sk[2]))
    return {n: _fill(rng, s) for n, s in sk[1].items()}


def _skeletons(seed: int, n: int = 6) -> list[Any]:
    """``n`` documents' structures: mostly a window result's kind of object, a key and a value of any shape."""
    rng = random.Random(seed)
    return [("dict", {"key": ("leaf", "str"), "v": _skeleton(rng)}) if rng.random() < 0.7 else _skeleton(rng)
            for _ in range(n)]


def _documents(seed: int) -> list[Any]:
    rng = random.Random(seed + 10_000)
    return [_fill(rng, sk) for sk in _skeletons(seed)]


def test_a_shape_is_what_the_encoder_writes() -> None:
    """The shape of a value is that of the JSON text it becomes, read back: the encoder's default
    (an enum, a Decimal, a dataclass) and its handling of ints, floats, tuples and keys mirrored."""
    for seed in range(300):
        for doc in _documents(seed):
            back = json.loads(to_json(doc))
            # a Decimal is written as its text; its own shape (d<places>) is the text's elsewhere
            assert shape(document(_decimals_as_text(doc))) == shape(back), (seed, doc)
            if "d2" not in shape(document(doc)):
                assert shape(document(doc)) == shape(back), (seed, doc)
    keys = {1: 0, 2.5: 1.5, False: 2, None: "x"}  # json.dumps names them "1", "2.5", "false", "null"
    assert shape(keys) == shape(json.loads(json.dumps(keys)))
    assert shape(WindowResult("k", 0, 1, 2**64, 0)) == \
        'o{"fire_index":i,"key":s,"value":I20,"window_end":i,"window_start":i}'


def _decimals_as_text(o: Any) -> Any:
    from decimal import Decimal

    if isinstance(o, Decimal):
        return str(o)
    if isinstance(o, dict):
        return {k: _decimals_as_text(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_decimals_as_text(v) for v in o]
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return {f.name: _decimals_as_text(getattr(o, f.name)) for f in dataclasses.fields(o)}
    return o


def test_a_decimal_s_shape_counts_its_places() -> None:
    from decimal import Decimal

    assert [shape(Decimal(t)) for t in ("1.25", "-0.100", "7", "1E+2", "1E-7", "NaN", "-Infinity")] == [
        "d2", "d3", "d0", "d0", "d7", "s", "s"]
    assert shape({"a": [Decimal("1.5")], "b": Decimal("2")}) == 'o{"a":a[d1],"b":d0}'


def test_a_bucket_reports_its_shapes_until_there_are_too_many() -> None:
    shapes: set[str] = set()
    docs = [{f"f{i}": i} for i in range(MAX_SHAPES)]
    assert [json_row(d, shapes) for d in docs] == [to_json(d) for d in docs]
    assert reported(shapes) == sorted(shape(d) for d in docs)
    json_row({"one": "more"}, shapes)
    json_row({"and": "more"}, shapes)
    assert reported(shapes) is None and len(shapes) == MAX_SHAPES + 1  # stops collecting
    assert merge_shapes([reported({"x"}), reported(shapes)]) is None


def test_shapes_tell_apart_what_spark_infers_differently() -> None:
    assert len({shape(v) for v in (1, 2**63, 2**64 * 10, 1.0, "1", "", True, None, [1], [1.0], [], {"a": 1},
                                    {"b": 1}, {"a": 1.0}, (1, "x"))}) == 15
    assert shape([1, 2, 3]) == shape([5]) and shape({"a": -3}) == shape({"a": 2**63 - 1})
    assert merge_shapes([["x"], ["y", "x"]]) == frozenset({"x", "y"})
    assert merge_shapes([["x"], None]) is None


def test_batches_with_the_same_shapes_infer_the_same_schema_and_a_kept_schema_reads_them_as_spark_does(
        spark: Any) -> None:
    from pyspark.sql import functions as F

    from lowwater.spark.json_rows import _infer, _parse_shape

    frames = JsonFrames()
    rng = random.Random(11)
    for seed in range(20):
        docs = _documents(seed)
        # a second batch: the same structures, every value drawn anew, in another order, one twice
        skeletons = _skeletons(seed)
        values = random.Random(20_000 + seed)
        other = [_fill(values, sk) for sk in [*skeletons, rng.choice(skeletons)]]
        rng.shuffle(other)
        first, second = _strings(spark, docs), _strings(spark, other)
        shapes = frozenset(shape(document(d)) for d in docs)
        assert shapes == frozenset(shape(document(d)) for d in other), seed
        assert all(_parse_shape(s)[1] == len(s) for s in shapes), seed  # read back whole (JsonFrames.settled)
        known, inferred = shapes in frames.schemas, frames.inferred
        frames.schema(first, "json", shapes)
        kept = frames.schema(second, "json", shapes)  # the schema kept at the first batch (or before): no inference
        assert frames.inferred == inferred + (0 if known else 1), seed
        spark_own = _infer(second)  # Spark's inference over the second batch, and its read
        assert kept == spark_own.schema, seed
        if seed % 6 == 0:  # the rows too (two more jobs)
            assert _rows(second.select(F.from_json("json", kept).alias("r")).select("r.*")) == _rows(spark_own), seed
    assert len(frames.schemas) > 10, "the random documents should make many different sets of shapes"


def test_window_results_get_the_window_struct_with_a_kept_schema_as_when_inferred(spark: Any) -> None:
    batches = {
        "results": ([WindowResult("a", 0, 1_000, 3), WindowResult("b", 1_000, 2_000, 5, 1)],
                    [WindowResult("c", 5_000, 6_000, -2**63)]),
        "a field named window": ([{"window_start": 0, "window_end": 10, "window": "w"}],
                                 [{"window_start": 7, "window_end": 9, "window": "v"}]),
        "not a window": ([{"window_start": "x", "window_end": 1}], [{"window_start": "y", "window_end": 2}]),
    }
    for what, (first, second) in batches.items():
        frames = JsonFrames()
        shapes = frozenset(shape(document(d)) for d in first)
        _, schema = frames.settled(_strings(spark, first), "json", shapes, None, what, 0)
        kept, _ = frames.settled(_strings(spark, second), "json", shapes, schema, what, 1)
        assert frames.inferred == 1, what
        inferred, _ = JsonFrames().settled(_strings(spark, second), "json", None, None, what, 0)
        assert kept.schema == inferred.schema, what
        assert _rows(kept) == _rows(inferred), what
        assert ("window" in kept.columns) == (what != "not a window"), what
    assert str(kept.schema["window_start"].dataType) == "StringType()"


def test_late_documents_get_the_native_late_columns_with_a_kept_schema_as_when_inferred(spark: Any) -> None:
    """The late output's columns from late documents: the element's fields, then the position and
    the rejected windows typed as the native path types them (``source_`` names where the element
    has the field), also when every list of windows in a batch is empty (a user assigner that gave
    the element none: the inference has no struct to read)."""
    from lowwater.core.windows import TimeWindow
    from lowwater.spark.json_rows import late_document

    native = ["int", "bigint", "array<struct<start:bigint,end:bigint>>"]
    batches = {
        "windows": ([late_document({"key": "a", "ts": 5}, 1, 7, (TimeWindow(0, 10), TimeWindow(-5, 5)))],
                    [late_document({"key": "b", "ts": 15}, 0, 9, (TimeWindow(10, 20),))],
                    ["key", "ts", "partition", "offset", "rejected_windows"]),
        "no windows": ([late_document({"key": "a", "ts": 5}, 1, 7, ())],
                       [late_document({"key": "b", "ts": 6}, 2, 3, ())],
                       ["key", "ts", "partition", "offset", "rejected_windows"]),
        "the element's names": ([late_document({"offset": "x", "rejected_windows": 1}, 1, 7, (TimeWindow(0, 10),))],
                                [late_document({"offset": "y", "rejected_windows": 2}, 0, 8, (TimeWindow(0, 10),))],
                                ["offset", "rejected_windows", "partition", "source_offset",
                                 "source_rejected_windows"]),
        "a prefixed name": ([late_document({"source_partition": "x", "partition": 1}, 1, 7, ())],
                            [late_document({"source_partition": "y", "partition": 2}, 0, 8, ())],
                            ["partition", "source_partition", "source_source_partition", "offset",
                             "rejected_windows"]),
    }
    for what, (first, second, columns) in batches.items():
        frames = JsonFrames()
        shapes = frozenset(shape(document(d)) for d in first)
        inferred, schema = frames.settled(_strings(spark, first), "json", shapes, None, what, 0, late=True)
        kept, _ = frames.settled(_strings(spark, second), "json", shapes, schema, what, 1, late=True)
        assert frames.inferred == 1, what
        for df in (inferred, kept):
            assert df.columns == columns, (what, df.columns)
            assert [t for _, t in df.dtypes[-3:]] == native, (what, df.dtypes)
        assert kept.schema == JsonFrames().settled(_strings(spark, second), "json", None, None, what, 0,
                                                   late=True)[0].schema, what
    got = [r.asDict(recursive=True) for r in inferred.collect()]
    assert got[0]["source_source_partition"] == 1 and got[0]["source_partition"] == "x", got
    docs = [late_document({"offset": "x", "rejected_windows": 1}, 1, 7, (TimeWindow(0, 10),))]
    got = [r.asDict(recursive=True) for r in JsonFrames().settled(_strings(spark, docs), "json", None, None, "late", 0,
                                                                   late=True)[0].collect()]
    assert got == [{"offset": "x", "rejected_windows": 1, "partition": 1, "source_offset": 7,
                    "source_rejected_windows": [{"start": 0, "end": 10}]}], got


def _strings(spark: Any, docs: list[Any]) -> Any:
    """The documents' JSON as a DataFrame of one string column (made in the JVM: no Python workers)."""
    from pyspark.sql import functions as F

    return spark.range(1).select(F.explode(F.array(*[F.lit(to_json(d)) for d in docs])).alias("json"))


def _rows(df: Any) -> list[str]:
    def plain(v: Any) -> Any:
        if hasattr(v, "asDict"):
            return {k: plain(x) for k, x in v.asDict().items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        return v

    return sorted(json.dumps(plain(r), default=str, sort_keys=True) for r in df.collect())


def test_settled_frames_keep_their_columns_types_from_batch_to_batch(spark: Any) -> None:
    """A field null (or a list of nothing but nulls) in every row of a batch is no column until a
    batch gives it a value (nested too); a kept column a batch lacks is null in its rows, a new
    field is a column after the others; a DOUBLE column takes whole numbers and a STRING column
    any value as its JSON text; any other change of a type (nested, in a list) fails, naming the
    field."""
    import pytest
    from pyspark.sql.types import StringType, StructField, StructType

    from lowwater.core.errors import OutputSchemaError

    frames = JsonFrames()
    batches = [
        [{"k": "a", "x": 0.5, "n": None, "s": {"p": None, "q": 1}, "l": [1], "m": []},
         {"k": "b", "x": 1.5, "n": None, "m": [None]}],
        [{"k": "c", "x": 2, "n": 7, "s": {"p": "t", "q": 2}, "t": 5, "m": [3]}],
    ]
    first, kept = frames.settled(_strings(spark, batches[0]), "json", _shapes(batches[0]), None, "the output", 0)
    assert first.dtypes == [("k", "string"), ("l", "array<bigint>"), ("s", "struct<q:bigint>"), ("x", "double")]
    second, kept = frames.settled(_strings(spark, batches[1]), "json", _shapes(batches[1]), kept, "the output", 1)
    assert second.dtypes == [("k", "string"), ("l", "array<bigint>"), ("s", "struct<q:bigint,p:string>"),
                             ("x", "double"), ("m", "array<bigint>"), ("n", "bigint"), ("t", "bigint")]
    assert [r.asDict(recursive=True) for r in second.collect()] == [
        {"k": "c", "l": None, "s": {"q": 2, "p": "t"}, "x": 2.0, "m": [3], "n": 7, "t": 5}]
    third = [{"k": "d", "x": 3, "n": None, "t": "text"}]
    with pytest.raises(OutputSchemaError, match=r"the output: in batch 2 the field t holds STRING values, "
                                                r"where earlier batches made it a BIGINT column"):
        frames.settled(_strings(spark, third), "json", _shapes(third), kept, "the output", 2)
    for docs, field in (([{"k": "f", "s": {"q": 1.5}}], "s.q"), ([{"k": "f", "l": ["x"]}], "l[]")):
        with pytest.raises(OutputSchemaError, match=rf"the field {re.escape(field)} holds"):
            frames.settled(_strings(spark, docs), "json", None, kept, "out", 3)
    as_text = StructType([StructField("k", StringType()), StructField("t", StringType())])
    text, _ = frames.settled(_strings(spark, [{"k": "e", "t": 1}]), "json", None, as_text, "out", 4)
    assert [tuple(r) for r in text.collect()] == [("e", "1")]


def test_decimals_are_decimal_columns_that_keep_their_places(spark: Any) -> None:
    """Decimals (written as text, which Spark infers as a string) are a DECIMAL(38, s) column, ``s`` the
    most places a value has, nested and in lists too; integers beside them fit; so do later batches'
    values with no more places. More places, or floats, fail naming the field: the parse would round
    them (from_json rounds a DECIMAL half up, without a word)."""
    from decimal import Decimal

    import pytest

    from lowwater.core.errors import OutputSchemaError

    frames = JsonFrames()
    first = [{"k": "a", "v": Decimal("10.15"), "s": {"q": [Decimal("0.5")]}, "t": "x"},
             {"k": "b", "v": 3, "s": {"q": []}, "t": Decimal("NaN")}]
    df, kept = frames.settled(_strings(spark, first), "json", _shapes(first), None, "out", 0)
    assert df.dtypes == [("k", "string"), ("s", "struct<q:array<decimal(38,1)>>"), ("t", "string"),
                         ("v", "decimal(38,2)")]
    assert [r.asDict(recursive=True) for r in df.collect()] == [
        {"k": "a", "s": {"q": [Decimal("0.5")]}, "t": "x", "v": Decimal("10.15")},
        {"k": "b", "s": {"q": []}, "t": "NaN", "v": Decimal("3.00")}]
    second = [{"k": "c", "v": Decimal("1.5"), "s": {"q": [7]}}]
    df, kept = frames.settled(_strings(spark, second), "json", _shapes(second), kept, "out", 1)
    assert [r.asDict(recursive=True) for r in df.collect()] == [
        {"k": "c", "s": {"q": [Decimal("7.0")]}, "t": None, "v": Decimal("1.50")}]
    for docs, field, got in (([{"k": "d", "v": Decimal("1.005")}], "v", "DECIMAL(38,3)"),
                             ([{"k": "d", "v": 1.5}], "v", "DOUBLE"),
                             ([{"k": "d", "s": {"q": [Decimal("0.25")]}}], r"s\.q\[\]", "DECIMAL(38,2)")):
        with pytest.raises(OutputSchemaError, match=rf"the field {field} holds {re.escape(got)} values"):
            frames.settled(_strings(spark, docs), "json", _shapes(docs), kept, "out", 2)


def _shapes(docs: list[Any]) -> frozenset[str]:
    return frozenset(shape(document(d)) for d in docs)


def test_a_late_output_keeps_the_windows_type_when_a_batch_has_none(spark: Any) -> None:
    """The late output's rejected windows are ``array<struct<start, end>>`` from the first batch
    on, also when that batch's elements had no window (the inference would make it an array of
    strings, which a later batch's windows, kept as text, would not fit)."""
    from lowwater.core.windows import TimeWindow
    from lowwater.spark.json_rows import late_document

    frames = JsonFrames()
    kept = None
    got = []
    for i, doc in enumerate([late_document({"key": "a"}, 0, 1, ()), late_document({"key": "b"}, 1, 2, (
            TimeWindow(0, 10),))]):
        df, kept = frames.settled(_strings(spark, [doc]), "json", frozenset([shape(document(doc))]), kept, "late", i,
                                  late=True)
        assert df.dtypes == [("key", "string"), ("partition", "int"), ("offset", "bigint"),
                             ("rejected_windows", "array<struct<start:bigint,end:bigint>>")], df.dtypes
        got += [r.asDict(recursive=True) for r in df.collect()]
    assert got == [{"key": "a", "partition": 0, "offset": 1, "rejected_windows": []},
                   {"key": "b", "partition": 1, "offset": 2, "rejected_windows": [{"start": 0, "end": 10}]}]


def test_a_dataframe_sink_on_the_reference_runtime_gets_frames_typed_as_on_spark(spark: Any) -> None:
    """``DataFrameSink.write_batch`` (a reference runtime's rows): the frames of the Spark engine's
    rules, the columns kept by the sink from batch to batch. It was ``createDataFrame(rows)``: a batch
    whose every ``note`` was None failed with ``CANNOT_DETERMINE_TYPE``, and a Decimal was text."""
    from lowwater.api import CollectionSource, StreamExecutionEnvironment
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.spark.sinks import ForeachDataFrameSink

    got: list[tuple[int, str, list[tuple[Any, ...]]]] = []
    sink = ForeachDataFrameSink(
        lambda df, b: got.append((b, df.schema.simpleString(), [tuple(r) for r in df.collect()])))
    env = StreamExecutionEnvironment()
    batches = [[{"k": "a", "ts": 1, "note": "x", "amount": Decimal("1.50")}],
               [{"k": "a", "ts": 2, "note": None, "amount": 2}]]
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts")
    env.from_source(CollectionSource(batches), strategy).map(lambda e: e).add_sink(sink)
    env.execute()
    columns = "struct<k:string,ts:bigint,note:string,amount:decimal(38,2)>"
    assert got == [(0, columns, [("a", 1, "x", Decimal("1.50"))]), (1, columns, [("a", 2, None, Decimal("2.00"))])]


def test_the_reference_runtimes_late_output_reaches_a_dataframe_sink_with_the_spark_paths_columns(
        spark: Any, tmp_path: Path) -> None:
    """A late element on the reference runtime reaches a DataFrame sink with where it came from and the
    windows that rejected it, typed as the Spark paths' late output (a ``ForeachDataFrameSink``), or as
    flat rows (a ``DirectorySink``, which writes without Spark there). Both had the element alone."""
    from lowwater.api import CollectionSource, OutputTag, StreamExecutionEnvironment
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.spark.sinks import DirectorySink, ForeachDataFrameSink, read_directory

    got: list[tuple[Any, ...]] = []
    frames = ForeachDataFrameSink(lambda df, b: got.append((b, df.dtypes, [r.asDict(recursive=True)
                                                                            for r in df.collect()])))
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    batches = [[{"k": "a", "ts": 5000, "n": 1}], [{"k": "a", "ts": 100, "n": 2}]]  # the second: [0, 1 s) closed
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    out = (env.from_source(CollectionSource(batches), strategy).key_by("k")
           .window(TumblingEventTimeWindows.of(1000)).side_output_late_data(late).sum("n"))
    out.get_side_output(late).add_sink(frames)
    out.get_side_output(late).add_sink(DirectorySink(tmp_path / "late", "jsonl"))
    env.execute()
    row = {"k": "a", "ts": 100, "n": 2, "partition": 0, "offset": 1, "rejected_windows": [{"start": 0, "end": 1000}]}
    assert got == [(1, [("k", "string"), ("ts", "bigint"), ("n", "bigint"), ("partition", "int"), ("offset", "bigint"),
                        ("rejected_windows", "array<struct<start:bigint,end:bigint>>")], [row])]
    assert read_directory(tmp_path / "late") == [row]


def test_a_dead_letters_text_reaches_a_dataframe_sink_as_the_native_path_writes_it(spark: Any) -> None:
    """The keyed and general paths' dead letters as a DataFrame (``outputs.dead_letter_output``): an
    unparsed Kafka value's text is ``record`` as it is, as the native path writes it, not quoted as a
    JSON string; an element's fields are JSON without their nulls, as Spark's ``to_json`` writes them."""
    from lowwater.spark.outputs import dead_letter_output

    rows = [{"reason": "record does not parse: 'invalid JSON'", "partition": 0, "offset": 3, "record": '{"a": 1'},
            {"reason": "missing key (user)", "partition": 0, "offset": 4, "record": {"ts": 5, "user": None}}]
    out = dead_letter_output(spark, rows, sourced=False)
    assert out.frame is not None
    assert [r["record"] for r in out.frame.orderBy("offset").collect()] == ['{"a": 1', '{"ts":5}']


@pytest.mark.parametrize("runtime", ["spark", "reference"])
def test_a_global_window_s_result_reaches_a_dataframe_sink_with_a_null_window_struct(
        spark: Any, tmp_path: Path, runtime: str) -> None:
    """A count window is a global window, from the 64-bit minimum to the maximum: no TIMESTAMP holds
    those, and ``timestamp_millis`` failed the query with ``long overflow``, naming neither the
    window nor the sink. Its ``window`` is null now, start and end, on Spark and on the reference
    runtime's DirectorySink alike."""
    from lowwater.api import StreamExecutionEnvironment
    from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.spark.engine import SparkRuntime
    from lowwater.spark.sinks import DirectorySink, read_directory
    from lowwater.spark.sources import BatchFilesSource

    BatchFilesSource.write(tmp_path / "in", [[{"key": "a", "ts": 100, "value": 1}, {"key": "a", "ts": 200, "value": 2},
                                              {"key": "a", "ts": 300, "value": 4}]])
    env = StreamExecutionEnvironment()
    (env.from_source(BatchFilesSource(tmp_path / "in", [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")], [0]),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").count_window(2).sum("value").add_sink(DirectorySink(tmp_path / "out", "jsonl")))
    if runtime == "spark":
        SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True).execute(env)
    else:
        env.execute()
    rows = read_directory(tmp_path / "out")
    assert [(r["key"], r["window_start"], r["window_end"], r["value"], r["fire_index"]) for r in rows] == [
        ("a", MIN_TIMESTAMP, MAX_TIMESTAMP, 3, 0)]
    assert [r["window"] for r in rows] == [{}]  # as Spark's JSON writer writes a struct of nulls


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_the_keyed_paths_frame_of_mixed_tuples_and_objects_reads_back_as_the_reference_runtimes_files(
        spark: Any, tmp_path: Path, fmt: str) -> None:
    """The values the pure test of the reference runtime's ``DirectorySink`` writes
    (``tests/test_directory_sink.py``), as the keyed and general paths make their frame
    (``settled_rows``) and Spark writes it: the same rows read back."""
    from lowwater.spark.json_rows import settled_rows
    from lowwater.spark.sinks import DirectorySink, read_directory
    from tests.test_directory_sink import MIXED, SPARK_READS_MIXED

    df, _ = settled_rows(spark, MIXED, JsonFrames(), None, "test", 0)
    DirectorySink(str(tmp_path / "spark"), fmt).write(df, 0)
    rows = read_directory(tmp_path / "spark")
    if fmt == "json":  # Spark's JSON writer leaves nulls out
        rows = [{"value": None, "detail": None, **r} for r in rows]
        rows = [r if r["detail"] is None else {**r, "detail": {"m": None, **r["detail"]}} for r in rows]
    assert sorted(rows, key=str) == sorted(SPARK_READS_MIXED, key=str)
