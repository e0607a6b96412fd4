"""KafkaShapedSource's JVM reader (jars/spark/lowwater-jvm.jar) against its Spark SQL checks.

The reader decides in one parse which records are elements and reads their fields; the SQL
checks, which parse every value twice, word the reasons of the bad ones. Both must say the same
of every value: the same dead letters, with the same reasons, and the same field values. Here
the same values go through the source with the reader and without it (as where the jar is not on
Spark's class path), and every row must be equal.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import random
from typing import Any

import pytest

from lowwater.spark import kafka_value
from lowwater.spark.sources import KafkaShapedSource
from tests.io.test_fields_and_batches import DECIMALS, TIMES
from tests.spark.test_kafka_shaped import BAD_VALUES, KAFKA_SCHEMA

pytestmark = pytest.mark.spark

FIELDS = [("s", "STRING"), ("n", "BIGINT"), ("i", "INT"), ("h", "SMALLINT"), ("t8", "TINYINT"), ("d", "DOUBLE"),
          ("f", "FLOAT"), ("b", "BOOLEAN"), ("ts", "TIMESTAMP"), ("day", "DATE"), ("m", "DECIMAL(10,2)"),
          ("z", "DECIMAL(2,2)"), ('q"\'', "STRING")]

# JSON texts of every kind, the edges of each declared type among them
SCALARS = [
    '"ann"', '""', '"\\u00e9\\ud83d\\ude00"', '"\\ud800"', '"\\udc00x"', '"a\\"b\\\\c\\/d\\n"', '"7"', '"true"',
    "0", "-0", "1", "-1", "127", "128", "-129", "32767", "32768", "2147483647", "2147483648", "-2147483649",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "1" + "0" * 40,
    "1.0", "1.5", "-2.25", "1e2", "1E-2", "1e400", "-1e400", "1e-400", "3.4028234663852886e38", "3.5e38", "1e38",
    "10.05", "10.050", "10.005", "0.5", "0.50", "0.0", "0e5", "99999999.99", "100000000", "-99999999.995", "1e3",
    "1e-2", "12345678.1200000000000000000000000000",
    "true", "false", "null", "[]", "[1, 2]", "{}", '{"x": 1}',
    *(json.dumps(t) for t, _, _ in TIMES), *(t for t, _ in DECIMALS),
    '"2024-02-29"', '"2023-02-29"', '"2024-01-01T24:00"', '"2024-01-01T23:59:60"', '"2024-01-01T10:20:30."',
    '"2024-01-01T10:20:30.123456789012Z"', '"0001-01-01T00:00:00+18:00"', '"9999-12-31T23:59:59.999-18:00"',
    '"2024-01-01T10:20:30+0530"', '"2024-01-01T10:20:30-05"', '"1969-12-31T23:59:59.9999Z"',
]
BROKEN = [  # whole values that are not one JSON object
    "", " ", "\t\n", "{", "}", '{"s": "a",}', '{"s": "a"} x', '{"s": "a"} {"s": "b"}', '{"s": "a"}, {"s": "b"}',
    '{"s": "a"}],[{"s": "b"}', "[1]", '"x"', "1", "null", "NaN", '{"d": NaN}', '{"d": Infinity}', "{'s': 'a'}",
    '{s: "a"}', '{"s": "a", "s": "b"}', '{"x": {"y": 1, "y": 2}}', '{"x": [{"y": 1, "y": 2}]}', '{"n": 01}',
    '{"n": +1}', '{"n": 1.}', '{"n": .5}', '{"n": -}', '{"s": "a\tb"}', '{"s": "\\x"}', '{"s": "\\\'"}',
    '\ufeff{"s": "a"}', '{"s": "a"}\u00a0', '{"s": "a"} // c', '{"x": "\\ud800"}', '{"\\ud800": 1}',
    '{"x": ["\\udc00"]}', '{"x": {"\\ud800\\udc00": "\\ud83d\\ude00"}}', '[' * 30 + ']' * 30,
    '{"x": ' + '[' * 600 + ']' * 600 + '}', '{"s": "a"}\n', ' \r\n{"s": "a"}\t ', '{"s":"a","n":1,"x":null}',
]


def _values(seed: int, count: int) -> list[bytes | None]:
    """``count`` values: objects of declared and undeclared fields of every kind, and broken ones."""
    rng = random.Random(seed)
    names = [n for n, _ in FIELDS] + ["x", "y", "n ", "S"]
    out: list[bytes | None] = [None, b'{"s": "\xff"}', b"\xed\xa0\x80", b'{"s": "\xc3\xa9"}',
                               b'{"s": "\xc3"}', b"\xef\xbb\xbf{}"]
    out += [t.encode() for t in BROKEN]
    for _ in range(count):
        k = rng.randint(0, 5)
        parts = []
        for _ in range(k):
            name = json.dumps(rng.choice(names))
            value = rng.choice(SCALARS) if rng.random() < 0.9 else f'{{"a": [{rng.choice(SCALARS)}]}}'
            parts.append(f"{name}{rng.choice([':', ': ', ' :'])}{value}")
        out.append(("{" + rng.choice([",", ", "]).join(parts) + "}").encode())
    return out


def _rows(spark: Any, values: list[bytes | None], fields: list[tuple[str, str]], value_type: str) -> list[Any]:
    rows = [{"key": None, "value": v if value_type == "BINARY" or v is None else v.decode("utf-8", "replace"),
             "topic": "t", "partition": 0, "offset": i, "timestampType": 0,
             "timestamp": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)} for i, v in enumerate(values)]
    schema = KAFKA_SCHEMA.replace("value BINARY", f"value {value_type}")
    source = KafkaShapedSource(spark.createDataFrame(rows, schema), fields)
    return source.spark_stream(spark).orderBy("_offset").collect()


def _sql_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import lowwater.spark.dataframe_source as module

    monkeypatch.setattr(module, "jvm_reader", lambda spark, declared: None)


def test_the_reader_is_on_sparks_class_path_and_reads_the_values(spark: Any) -> None:
    """./dev builds the jar into jars/spark, which the test session's spark.jars holds: without it
    every other test here would compare the SQL checks with themselves."""
    assert kafka_value.jvm_reader(spark, [("s", "STRING")]) is not None
    df = spark.createDataFrame([{"key": None, "value": b'{"s": "a"}', "topic": "t", "partition": 0, "offset": 0,
                                 "timestampType": 0, "timestamp": dt.datetime(2024, 1, 1)}], KAFKA_SCHEMA)
    plan = KafkaShapedSource(df, [("s", "STRING")]).spark_stream(spark)._jdf.queryExecution().analyzed().toString()
    assert "lowwater_kafka_value_" in plan


def test_without_the_class_the_source_says_so_and_checks_every_value_in_sql(
        spark: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A session started without the jar (a spark-submit not given it) reads the same, slower, and
    the log says why: registering a class Spark cannot load fails as the missing jar does."""
    monkeypatch.setattr(kafka_value, "JVM_CLASS", "dev.lowwater.NoSuchReader")
    monkeypatch.setattr(kafka_value, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="lowwater.spark"):
        rows = _rows(spark, [b'{"s": "a"}', b'{"s": 1}'], [("s", "STRING")], "BINARY")
        _rows(spark, [b"{}"], [("s", "STRING")], "BINARY")
    said = [r.getMessage() for r in caplog.records if "not on Spark's class path" in r.getMessage()]
    assert len(said) == 1 and "jars/spark/lowwater-jvm.jar" in said[0], said  # once a session
    assert [(r["s"], r["_corrupt"]) for r in rows] == [("a", None), (None, "field 's': 1 is not a STRING")]


@pytest.mark.parametrize("value_type", ["BINARY", "STRING"])
def test_the_reader_and_the_sql_checks_read_every_value_alike(
        spark: Any, monkeypatch: pytest.MonkeyPatch, value_type: str) -> None:
    values = _values(seed=11, count=1500)
    if value_type == "STRING":
        values = [v for v in values if v is None or _utf8(v)]
    fast = _rows(spark, values, FIELDS, value_type)
    _sql_only(monkeypatch)
    slow = _rows(spark, values, FIELDS, value_type)
    differ = [(values[r["_offset"]], r.asDict(), s.asDict()) for r, s in zip(fast, slow, strict=True) if r != s]
    assert not differ, f"{len(differ)} of {len(values)} differ; the first: {differ[:3]}"
    # both sorts are there in number: elements, and dead letters of every reason
    good = sum(r["_corrupt"] is None for r in fast)
    assert 200 < good < len(values) - 200, good
    reasons = {r["_corrupt"].split(":")[0].split(" (")[0] for r in fast if r["_corrupt"]}
    assert {"invalid JSON", "empty value", "field 's'", "field 'ts'", "field 'm'"} <= reasons, reasons


def test_the_bad_values_of_the_sql_tests_read_alike(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    values = [v for v, _ in BAD_VALUES.values()]
    fields = [("user", "STRING"), ("at", "TIMESTAMP"), ("amount", "DOUBLE")]
    fast = _rows(spark, values, fields, "BINARY")
    _sql_only(monkeypatch)
    assert fast == _rows(spark, values, fields, "BINARY")
    assert all(r["_corrupt"] for r in fast)


def _utf8(v: bytes) -> bool:
    try:
        v.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
