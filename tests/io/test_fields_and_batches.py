"""Declared field types (one meaning each, in milliseconds) and the micro-batch cut of a log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lowwater.core.errors import ConfigurationError
from lowwater.io import PartitionedLogReader, PartitionedLogWriter
from lowwater.io.fields import FieldError, parse_fields, read_element, read_value
from lowwater.io.log_batches import LogBatching


@pytest.mark.parametrize(("value", "declared", "expected"), [
    ("1970-01-01T00:00:00.0019Z", "TIMESTAMP", 1),                     # floored to the millisecond
    ("1969-12-31T23:59:59.9995", "TIMESTAMP", -1),                     # floor, not truncation; naive is UTC
    ("2024-05-01T12:00:00+02:00", "TIMESTAMP", 1_714_557_600_000),
    ("1970-01-02", "DATE", 86_400_000),
    (7, "BIGINT", 7), (2**63 - 1, "BIGINT", 2**63 - 1), (7, "DOUBLE", 7.0), (True, "BOOLEAN", True),
    ("x", "STRING", "x"), (None, "BIGINT", None), (127, "TINYINT", 127),
])
def test_a_value_reads_as_its_declared_type(value: object, declared: str, expected: object) -> None:
    assert read_value(value, declared) == expected


@pytest.mark.parametrize(("value", "declared"), [
    (1_700_000_000_000, "TIMESTAMP"), ("yesterday", "TIMESTAMP"), ("20240501", "DATE"), ("7", "BIGINT"),
    (1.5, "BIGINT"), (True, "BIGINT"), (2**63, "BIGINT"), (128, "TINYINT"), (float("nan"), "DOUBLE"),
    (10**400, "DOUBLE"), (1, "BOOLEAN"), (5, "STRING"), ("\ud800", "STRING"), (1e39, "FLOAT"),
    (2**40, "INT"),
])
def test_a_value_of_another_kind_is_refused(value: object, declared: str) -> None:
    with pytest.raises(FieldError, match=f"is not {'an' if declared == 'INT' else 'a'} {declared}$"):
        read_value(value, declared)


def test_fields_are_canonical_and_an_unknown_type_is_an_error_before_the_run() -> None:
    assert parse_fields([("a", "long"), ("b", "Timestamp")]) == [("a", "BIGINT"), ("b", "TIMESTAMP")]
    assert parse_fields([("a", "decimal(10, 2)"), ("b", "NUMERIC"), ("c", "dec(5)")]) == [
        ("a", "DECIMAL(10,2)"), ("b", "DECIMAL(10,0)"), ("c", "DECIMAL(5,0)")]  # Spark's defaults
    for bad in ("DECIMAL(39,2)", "DECIMAL(2,3)", "DECIMAL(0)"):
        with pytest.raises(ConfigurationError, match=r"1 <= p <= 38 and s <= p"):
            parse_fields([("a", bad)])
    with pytest.raises(ConfigurationError, match="DECIMAL"):
        parse_fields([("a", "MONEY")])
    with pytest.raises(ConfigurationError, match="twice"):
        parse_fields([("a", "BIGINT"), ("a", "STRING")])
    element = read_element({"a": 1, "extra": 2}, [("a", "BIGINT"), ("b", "STRING")])
    assert element == {"a": 1, "b": None}


TIMES = [  # (text, what a TIMESTAMP field reads, what a DATE field reads: epoch ms, or None for a dead letter)
    ("2024-01-01", 1_704_067_200_000, 1_704_067_200_000), ("2024-01-01T00:00", 1_704_067_200_000, None),
    ("2024-01-01T10:20:30", 1_704_104_430_000, None), ("2024-01-01 10:20:30", 1_704_104_430_000, None),
    ("2024-01-01T10", 1_704_103_200_000, None), ("2024-01-01 10:20", 1_704_104_400_000, None),
    ("2024-01-01T10:20:30Z", 1_704_104_430_000, None), ("2024-01-01T10:20:30.5Z", 1_704_104_430_500, None),
    ("2024-01-01T10:20:30.1234567Z", 1_704_104_430_123, None), ("2024-01-01T10:20:30.Z", 1_704_104_430_000, None),
    ("2024-01-01T10:20:30+05:30", 1_704_084_630_000, None), ("2024-01-01T10:20:30+0530", 1_704_084_630_000, None),
    ("2024-01-01T10:20:30+05", 1_704_086_430_000, None), ("2024-01-01T10:20:30-08:00", 1_704_133_230_000, None),
    ("2024-01-01T10:20:30-0000", 1_704_104_430_000, None), ("2024-01-01T10:20:30+14:00", 1_704_054_030_000, None),
    ("1969-12-31T23:59:59.9995Z", -1, None), ("0001-01-01T00:00:00Z", -62_135_596_800_000, None),
    ("9999-12-31T23:59:59.999Z", 253_402_300_799_999, None), ("1970-01-02", 86_400_000, 86_400_000),
    # forms one reader takes and the other does not, or reads as another instant: dead letters on every source
    ("5000", None, None),                       # Spark's JSON reader: the year 5000
    ("0", None, None), ("20240101", None, None),  # Spark: a DATE 20,240,101 days after 1970
    ("2024-1-1", None, None), ("2024-01-01T10:20:30 UTC", None, None), ("+10000-01-01T00:00:00", None, None),
    ("0000-01-01T00:00:00", None, None),         # Spark's year 0; Python has none
    ("2024-01-01t10:20:30", None, None), ("20240101T000000", None, None), ("2024-W01-1", None, None),  # Python 3.11
    ("2024-01-01T10:20:30,5Z", None, None), ("2024-01-01T10:20Z", None, None), ("2024-01-01T10Z", None, None),
    ("2024-01-01T10:20:30+23:59", None, None),   # Python takes offsets to 24 h, Spark to 18
    ("2024-01-01T24:00:00", None, None), ("2024-01-01T10:20:60", None, None), ("2024-02-30", None, None),
    ("2024-01-01Z", None, None), ("2024-01-01T10:20:30Z[UTC]", None, None), ("1000-02-29", None, None),
]


def test_timestamp_and_date_texts_read_the_same_forms_on_every_python() -> None:
    """:data:`~lowwater.io.fields.TIMESTAMP_TEXT` and ``DATE_TEXT``: the forms both Python and Spark's
    JSON reader (the Kafka source: tests/spark/test_kafka_shaped.py) read to the same instant."""
    for text, ts, date in TIMES:
        for declared, expected in (("TIMESTAMP", ts), ("DATE", date)):
            if expected is None:
                with pytest.raises(FieldError):
                    read_value(text, declared)
            else:
                assert read_value(text, declared) == expected, (text, declared)


DECIMALS = [  # (JSON text, what a DECIMAL(10,2) field reads: the Decimal, or None for a dead letter)
    ("10.05", "10.05"), ("10.050", "10.05"), ("10.5", "10.50"), ("10", "10.00"), ("-0.01", "-0.01"), ("0", "0.00"),
    ("99999999.99", "99999999.99"), ("12345678.1200000000000000000000000000", "12345678.12"),
    ("10.005", None),                    # rounded, it would be another number
    ("100000000", None), ("100000000.00", None), ("123456789012345678.9", None),  # more than 8 integer digits
    ("1e3", "1000.00"), ("1.5E-1", "0.15"), ("1.0005e1", None),  # exponent notation: the same numbers
    ("1.0000000000000001", None),        # a float would read 1.0: the text is read, not the float
    ('"10.50"', None), ("true", None),
    ("1e999999999", None), ("-1e-999999999", None),  # too large to quantize, too many places
]


@pytest.mark.parametrize(("text", "expected"), DECIMALS)
def test_a_decimal_field_reads_the_number_s_text_exactly_or_refuses_it(text: str, expected: str | None) -> None:
    from decimal import Decimal

    from lowwater.io.fields import decode_json

    value = decode_json(f'{{"a": {text}}}')["a"]
    if expected is None:
        with pytest.raises(FieldError, match=r" is not a DECIMAL\(10,2\)"):
            read_value(value, "DECIMAL(10,2)")
    else:
        got = read_value(value, "DECIMAL(10,2)")
        assert isinstance(got, Decimal) and str(got) == expected
    assert read_value(None, "DECIMAL(10,2)") is None
    plain = json.loads(text)
    if isinstance(plain, float) and abs(plain) < float("inf"):  # the other types read json.loads's float
        assert read_value(value, "DOUBLE") == plain and type(read_value(value, "DOUBLE")) is float
        with pytest.raises(FieldError, match=rf"^{re.escape(repr(plain))} is not a BIGINT$"):
            read_value(value, "BIGINT")


def test_a_decimal_field_through_the_log_reads_what_was_written(tmp_path: Path) -> None:
    """The log's JSON keeps a number's text for a DECIMAL field (a float would keep 15 to 17 digits):
    a 20-digit amount is read as written, through both of the log's formats."""
    from decimal import Decimal

    for fmt in ("jsonl", "parquet"):
        w = PartitionedLogWriter(tmp_path / fmt, fmt, fsync=False)
        w.append(0, [{"a": 1}])
        reader = PartitionedLogReader(tmp_path / fmt)
        path = next((tmp_path / fmt).rglob("*.jsonl" if fmt == "jsonl" else "*.parquet"))
        if fmt == "jsonl":
            path.write_text('{"partition": 0, "offset": 0, "timestamp": 5, "value": {"a": 123456789012345678.25}}\n')
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({"offset": [0], "partition": [0], "timestamp": [5],
                                     "value": ['{"a": 123456789012345678.25}']}), path)
        [record] = reader.read({0: 0}, exact_numbers=True)  # as a source with a DECIMAL field reads
        assert read_element(record.value, [("a", "DECIMAL(20,2)")]) == {"a": Decimal("123456789012345678.25")}
        assert read_element(record.value, [("a", "DOUBLE")]) == {"a": 123456789012345678.25}
        [plain] = reader.read({0: 0})  # without: json.loads's floats, at no cost
        assert type(plain.value["a"]) is float and type(record.value["a"]) is Decimal


def test_the_writer_writes_a_decimal_as_its_exact_number_in_both_formats(tmp_path: Path) -> None:
    """The writer refused a Decimal (not JSON-serialisable), so a DECIMAL field could only be written
    through a float, rounded before lowwater read its text; a text that looks like the marker stays text."""
    from decimal import Decimal

    for fmt in ("jsonl", "parquet"):
        w = PartitionedLogWriter(tmp_path / fmt, fmt, fsync=False)
        w.append(0, [{"a": Decimal("12345678901234567.89"), "b": [Decimal("-0.10")], "c": "\x00decimal:1"}])
        with pytest.raises(ConfigurationError, match="not JSON-serialisable"):
            w.append(0, [{"a": Decimal("NaN")}])
        [record] = PartitionedLogReader(tmp_path / fmt).read({0: 0}, exact_numbers=True)
        assert read_element(record.value, [("a", "DECIMAL(19,2)"), ("c", "STRING")]) == {
            "a": Decimal("12345678901234567.89"), "c": "\x00decimal:1"}
        assert record.value["b"] == [Decimal("-0.10")]


def test_a_batch_takes_at_most_its_records_and_segments_per_partition(tmp_path: Path) -> None:
    w = PartitionedLogWriter(tmp_path / "log", fsync=False)
    for n in (3, 2, 4):
        w.append(0, [{"i": i} for i in range(n)])
    w.append(1, [{"i": 0}])
    reader = PartitionedLogReader(tmp_path / "log")
    assert reader.segment_starts(0) == [0, 3, 5]
    assert LogBatching(records_per_batch=4).next_end(reader, {}) == {0: 4, 1: 1}
    assert LogBatching(None, segments_per_batch=1).next_end(reader, {0: 1}) == {0: 3, 1: 1}
    assert LogBatching(None, segments_per_batch=2).next_end(reader, {0: 3}) == {0: 9, 1: 1}
    assert LogBatching(2, segments_per_batch=1).next_end(reader, {0: 4, 1: 1}) == {0: 5, 1: 1}
    with pytest.raises(ConfigurationError):
        LogBatching(records_per_batch=0)


def test_a_line_nested_3000_deep_is_one_bad_record_not_a_recursion_error(tmp_path: Path) -> None:
    part = tmp_path / "log" / "partition=0"
    part.mkdir(parents=True)
    (part / f"segment-{0:020d}.jsonl").write_text("[" * 3000 + "]" * 3000 + "\n" + '{"value": {}}\n')
    records = PartitionedLogReader(tmp_path / "log").read({0: 0})
    assert [r.offset for r in records] == [0, 1]
    assert records[0].error is not None and "nested too deeply" in records[0].error
    assert records[1].value == {}
