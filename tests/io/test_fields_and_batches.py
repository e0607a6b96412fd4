"""Declared field types (one meaning each, in milliseconds) and the micro-batch cut of a log."""

from __future__ import annotations

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
])
def test_a_value_of_another_kind_is_refused(value: object, declared: str) -> None:
    with pytest.raises(FieldError, match=f"is not a {declared}"):
        read_value(value, declared)


def test_fields_are_canonical_and_an_unknown_type_is_an_error_before_the_run() -> None:
    assert parse_fields([("a", "long"), ("b", "Timestamp")]) == [("a", "BIGINT"), ("b", "TIMESTAMP")]
    with pytest.raises(ConfigurationError, match="DECIMAL"):
        parse_fields([("a", "DECIMAL(10,2)")])
    with pytest.raises(ConfigurationError, match="twice"):
        parse_fields([("a", "BIGINT"), ("a", "STRING")])
    element = read_element({"a": 1, "extra": 2}, [("a", "BIGINT"), ("b", "STRING")])
    assert element == {"a": 1, "b": None}


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
