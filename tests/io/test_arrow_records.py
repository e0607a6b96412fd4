"""Arrow batches of a log agree, line for line, with the codec (PartitionedLogReader + read_element)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lowwater.io import PartitionedLogReader, PartitionedLogWriter
from lowwater.io.arrow_records import read_arrow, to_arrow

FIELDS = [("user", "STRING"), ("ts", "BIGINT"), ("amount", "DOUBLE"), ("ok", "BOOLEAN")]

GOOD = '{"partition": 0, "offset": %d, "timestamp": 5, "value": {"user": "u", "ts": 1, "amount": 2.5, "ok": true}}'
ODD_LINES = [
    "",
    "  ",
    "[]",
    "null",
    '{"value": null}',
    '{"timestamp": 1}',
    '{"value": 3}',
    '{"value": {"user": 5}}',
    '{"value": {"ts": 1.5}}',
    '{"value": {"ts": "7"}}',
    '{"value": {"ts": true}}',
    '{"value": {"ts": 99999999999999999999}}',
    '{"value": {"amount": NaN}}',
    '{"value": {"amount": 1e400}}',
    '{"value": {"amount": 7}}',
    '{"value": {"user": "a", "user": "b"}}',
    '{"value": {"user": "\\ud800"}}',
    '{"offset": "1", "value": {}}',
    '{"offset": 99, "value": {}}',
    '{"partition": 3, "value": {}}',
    '{"partition": 0, "value": {"extra": [1, {"x": 2}]}}',
    '{"timestamp": "5", "value": {}}',
    '{"timestamp": 5.0, "value": {}}',
    '{"timestamp": 99999999999999999999, "value": {}}',
    '{"timestamp": -9223372036854775809, "value": {}}',
    '{"value": {"ok": 1}}',
    '{"value": {}, "value": {"user": "x"}}',
    '{"offset": null, "value": {"user": "n"}}',  # null: absent, on both
    '{"partition": null, "value": {"user": "n"}}',
]


def _rows(batches: list[object]) -> list[dict[str, object]]:
    return [row for b in batches for row in b.to_pylist()]  # type: ignore[attr-defined]


@pytest.mark.parametrize("odd", ODD_LINES)
def test_a_segment_with_one_odd_line_reads_as_the_codec_reads_it(tmp_path: Path, odd: str) -> None:
    part = tmp_path / "log" / "partition=0"
    part.mkdir(parents=True)
    lines = [GOOD % 0, odd, GOOD % 2]
    (part / f"segment-{0:020d}.jsonl").write_text("\n".join(lines) + "\n")
    reader = PartitionedLogReader(tmp_path / "log")
    expected = _rows([to_arrow(reader.read({0: 0}), FIELDS)])
    assert _rows(list(read_arrow(reader, 0, 0, 3, FIELDS))) == expected
    assert _rows(list(read_arrow(reader, 0, 1, 2, FIELDS))) == expected[1:2]


def test_ranges_across_segments_and_appended_lines_read_as_the_codec_reads_them(tmp_path: Path) -> None:
    w = PartitionedLogWriter(tmp_path / "log", fsync=False)
    for k in range(4):
        w.append(0, [{"user": f"u{k}{i}", "ts": i, "amount": i / 2, "ok": i % 2 == 0} for i in range(5)])
    last = sorted((tmp_path / "log" / "partition=0").glob("segment-*"))[-1]
    with open(last, "a") as f:  # an external producer appends, and is half-way through a line
        f.write(json.dumps({"value": {"user": "ext", "ts": 9}}) + "\n" + '{"value": {"us')
    reader = PartitionedLogReader(tmp_path / "log")
    assert reader.end_offsets() == {0: 21}
    for start, end in [(0, 21), (3, 12), (5, 10), (19, 21), (20, 21)]:
        expected = _rows([to_arrow(reader.read({0: start}, {0: end}), FIELDS)])
        assert _rows(list(read_arrow(reader, 0, start, end, FIELDS))) == expected, (start, end)
        assert [r["_offset"] for r in expected] == list(range(start, end))


def test_timestamp_fields_take_the_codec_and_read_as_milliseconds(tmp_path: Path) -> None:
    PartitionedLogWriter(tmp_path / "log").append(0, [{"at": "1970-01-01T00:00:02.0019+00:00"}, {"at": 5}])
    reader = PartitionedLogReader(tmp_path / "log")
    rows = _rows(list(read_arrow(reader, 0, 0, 2, [("at", "TIMESTAMP")])))
    assert rows[0]["at"] == 2001 and rows[0]["_corrupt"] is None
    assert rows[1]["at"] is None and "is not a TIMESTAMP" in rows[1]["_corrupt"]


# -- Parquet segments: the `value` texts take Arrow's JSON reader where it provably agrees ----------
GOOD_VALUE = '{"user": "u", "ts": 1, "amount": 2.5, "ok": true}'
ODD_VALUES = [
    "", " ", "[]", "null", "3", '"x"', '{"user": 5}', '{"ts": 1.5}', '{"ts": "7"}', '{"ts": true}',
    '{"ts": 99999999999999999999}', '{"amount": NaN}', '{"amount": 1e400}', '{"amount": 7}',
    '{"user": "a", "user": "b"}', '{"user": "\\ud800"}', '{"extra": [1, {"x": 2}]}', '{"ok": 1}', "{}",
    '{"user": "x"}, "ts": 5', '{"user": "x"} {"user": "y"}', '{"user":\n"x"}', '{"user":\r"x"}', ' {"user": "x"}',
    '{"user": "x"', None,
]


def test_lines_that_are_not_one_record_each_are_dead_letters_as_the_codec_says(tmp_path: Path) -> None:
    """Arrow reads a stream of JSON values: an object cut over two lines and two objects on one made
    three rows of three lines, at the wrong offsets, and three dead letters became three records."""
    part = tmp_path / "log" / "partition=0"
    part.mkdir(parents=True)
    lines = ['{"value": {"user": "a", "ts": 1}, "note":', '{"x": 1}}',
             '{"value": {"user": "b", "ts": 2}}{"value": {"user": "c", "ts": 3}}', GOOD % 3]
    (part / f"segment-{0:020d}.jsonl").write_text("\n".join(lines) + "\n")
    reader = PartitionedLogReader(tmp_path / "log")
    expected = _rows([to_arrow(reader.read({0: 0}), FIELDS)])
    assert [r["_corrupt"] is not None for r in expected] == [True, True, True, False]
    assert _rows(list(read_arrow(reader, 0, 0, 4, FIELDS))) == expected


def _parquet_segment(root: Path, values: list[str | None], **columns: object) -> PartitionedLogReader:
    import pyarrow as pa
    import pyarrow.parquet as pq

    part = root / "log" / "partition=0"
    part.mkdir(parents=True)
    n = len(values)
    data = {"partition": columns.get("partition", pa.array([0] * n, pa.int32())),
            "offset": columns.get("offset", pa.array(range(n), pa.int64())),
            "timestamp": columns.get("timestamp", pa.array([5] * n, pa.int64())),
            "value": pa.array(values, pa.string())}
    pq.write_table(pa.table({k: v for k, v in data.items() if v is not None}), part / f"segment-{0:020d}.parquet")
    return PartitionedLogReader(root / "log")


@pytest.mark.parametrize("odd", ODD_VALUES)
def test_a_parquet_segment_with_one_odd_value_reads_as_the_codec_reads_it(tmp_path: Path, odd: str | None) -> None:
    reader = _parquet_segment(tmp_path, [GOOD_VALUE, odd, GOOD_VALUE])
    expected = _rows([to_arrow(reader.read({0: 0}), FIELDS)])
    assert _rows(list(read_arrow(reader, 0, 0, 3, FIELDS))) == expected
    assert _rows(list(read_arrow(reader, 0, 1, 3, FIELDS))) == expected[1:]


def _odd_envelopes() -> list[tuple[str, dict[str, object]]]:
    import numpy as np
    import pyarrow as pa

    return [
        ("no envelope columns", {"partition": None, "offset": None, "timestamp": None}),
        ("a null timestamp", {"timestamp": pa.array([5, None, 7], pa.int64())}),
        ("a float timestamp", {"timestamp": pa.array([5.0, 6.0, 7.0], pa.float64())}),
        ("a string timestamp", {"timestamp": pa.array(["5", "6", "7"], pa.string())}),
        ("a wrong offset", {"offset": pa.array([0, 7, 2], pa.int64())}),
        ("a float offset", {"offset": pa.array([0.0, 1.0, 2.0], pa.float64())}),
        ("a null offset", {"offset": pa.array([0, None, 2], pa.int64())}),
        ("a wrong partition", {"partition": pa.array([0, 3, 0], pa.int32())}),
        ("a bool partition", {"partition": pa.array([False, False, False], pa.bool_())}),
        ("a uint64 timestamp", {"timestamp": pa.array(np.array([5, 2**63 + 1, 7], dtype=np.uint64))}),
    ]


@pytest.mark.parametrize("case", _odd_envelopes(), ids=lambda c: c[0])
def test_parquet_envelope_columns_read_as_the_codec_reads_them(tmp_path: Path, case: tuple[str, dict[str, object]]
                                                               ) -> None:
    reader = _parquet_segment(tmp_path, [GOOD_VALUE] * 3, **case[1])
    expected = _rows([to_arrow(reader.read({0: 0}), FIELDS)])
    assert _rows(list(read_arrow(reader, 0, 0, 3, FIELDS))) == expected


def test_the_writers_parquet_segments_take_the_fast_path_and_read_as_the_codec(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from lowwater.io import arrow_records

    w = PartitionedLogWriter(tmp_path / "log", "parquet", fsync=False)
    for k in range(3):
        w.append(0, [{"user": f"u{k}{i}", "ts": i, "amount": i / 2, "ok": i % 2 == 0} for i in range(5)])
    reader = PartitionedLogReader(tmp_path / "log")
    fast: list[object] = []
    real = arrow_records._fast_parquet
    monkeypatch.setattr(arrow_records, "_fast_parquet", lambda *a: fast.append(real(*a)) or fast[-1])
    for start, end in [(0, 15), (3, 12), (5, 10), (14, 15)]:
        expected = _rows([to_arrow(reader.read({0: start}, {0: end}), FIELDS)])
        assert _rows(list(read_arrow(reader, 0, start, end, FIELDS))) == expected, (start, end)
    assert fast and all(t is not None for t in fast), "well-formed segments should not fall back to the codec"
