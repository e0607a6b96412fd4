"""The partitioned log against real files under tmp_path."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from lowwater.core.errors import ConfigurationError
from lowwater.io import (
    MANIFEST_NAME,
    CorruptLogError,
    LogRecord,
    PartitionedLogReader,
    PartitionedLogWriter,
)

FORMATS = ["jsonl", "parquet"]


def _segment(root: Path, partition: int, first: int, ext: str = "jsonl") -> Path:
    return root / f"partition={partition}" / f"segment-{first:020d}.{ext}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip(tmp_path: Path, fmt: str) -> None:
    w = PartitionedLogWriter(tmp_path, format=fmt)
    assert w.append(0, [{"a": 1}, {"a": 2, "nested": {"x": [1, 2]}}], [100, None]) == [0, 1]
    assert w.append(1, [{"b": "é"}]) == [0]
    assert w.append(0, [{"a": 3}], [300]) == [2]
    assert w.end_offsets() == {0: 3, 1: 1}

    # one segment file per append, named by first offset, in the chosen format
    assert sorted(p.name for p in (tmp_path / "partition=0").iterdir()) == [
        f"segment-{0:020d}.{fmt}",
        f"segment-{2:020d}.{fmt}",
    ]
    manifest = json.loads((tmp_path / MANIFEST_NAME).read_text())
    assert manifest["format"] == fmt and manifest["partitions"] == [0, 1]

    r = PartitionedLogReader(tmp_path)
    assert r.partitions() == [0, 1]
    assert r.end_offsets() == {0: 3, 1: 1}
    assert r.read({1: 0, 0: 0}) == [
        LogRecord(0, 0, 100, {"a": 1}),
        LogRecord(0, 1, None, {"a": 2, "nested": {"x": [1, 2]}}),
        LogRecord(0, 2, 300, {"a": 3}),
        LogRecord(1, 0, None, {"b": "é"}),
    ]
    # ranges cut across segments; max_records caps each partition
    assert [x.offset for x in r.read({0: 1}, {0: 3})] == [1, 2]
    assert [(x.partition, x.offset) for x in r.read({0: 0, 1: 0}, None, 1)] == [(0, 0), (1, 0)]
    assert r.read({0: 3}) == []  # at the end: nothing yet
    assert r.read({0: 1}, {0: 99}) == r.read({0: 1})  # an end beyond the log is clipped


@pytest.mark.parametrize("fmt", FORMATS)
def test_offsets_continue_after_reopen(tmp_path: Path, fmt: str) -> None:
    PartitionedLogWriter(tmp_path, format=fmt).append(2, [{"i": i} for i in range(3)])
    again = PartitionedLogWriter(tmp_path)  # format adopted from the manifest
    assert again.format == fmt
    assert again.end_offsets() == {2: 3}
    assert again.append(2, [{"i": 3}, {"i": 4}]) == [3, 4]
    # a third writer, even with the same explicit format, derives offsets from disk
    assert PartitionedLogWriter(tmp_path, format=fmt).append(2, [{"i": 5}]) == [5]
    records = PartitionedLogReader(tmp_path).read({2: 0})
    assert [(x.offset, x.value) for x in records] == [(i, {"i": i}) for i in range(6)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_replay_of_a_range_is_identical(tmp_path: Path, fmt: str) -> None:
    w = PartitionedLogWriter(tmp_path, format=fmt)
    for batch in range(4):
        for p in (0, 1):
            w.append(p, [{"p": p, "b": batch, "k": k} for k in range(3)], [batch * 10 + k
                                                                           for k in range(3)])
    r = PartitionedLogReader(tmp_path)
    first = r.read({0: 2, 1: 5}, {0: 9, 1: 11})
    assert [(x.partition, x.offset) for x in first] == (
        [(0, o) for o in range(2, 9)] + [(1, o) for o in range(5, 11)]
    )
    w.append(0, [{"later": True}])  # the log grows between the two reads
    w.append(1, [{"later": True}])
    assert PartitionedLogReader(tmp_path).read({0: 2, 1: 5}, {0: 9, 1: 11}) == first
    assert r.read({0: 2, 1: 5}, {0: 9, 1: 11}) == first


def test_bad_lines_surface_with_partition_offset_and_error(tmp_path: Path) -> None:
    w = PartitionedLogWriter(tmp_path)
    w.append(3, [{"ok": 0}, {"ok": 1}])
    lines = [
        b'{"value": {"ok": 2}, "timestamp": 7}',  # foreign producer: no offset field, fine
        b'{"value": {"ok": 3}, oops',  # not JSON
        b"[1, 2]",  # not an object
        b'{"value": 5}',  # value not an object
        b'{"value": {}, "timestamp": "yesterday"}',  # bad timestamp
        b'{"offset": 99, "value": {}}',  # stored offset disagrees with position
        b"\xff\xfe",  # not UTF-8
        b"",  # empty line
        b'{"value": {"ok": 10}}',
    ]
    _segment(tmp_path, 3, 2).write_bytes(b"\n".join(lines) + b"\n")
    r = PartitionedLogReader(tmp_path)
    assert r.end_offsets() == {3: 11}
    records = r.read({3: 0})
    assert [x.offset for x in records] == list(range(11))
    assert all(x.partition == 3 for x in records)
    good = {x.offset: x.value for x in records if x.error is None}
    assert good == {0: {"ok": 0}, 1: {"ok": 1}, 2: {"ok": 2}, 10: {"ok": 10}}
    assert records[2].timestamp == 7
    errors = {x.offset: x.error for x in records if x.error is not None}
    assert all(records[o].value is None for o in errors)
    assert "invalid JSON" in errors[3] and "oops" in errors[3]
    assert "not an object" in errors[4]
    assert "'value' must be a JSON object" in errors[5]
    assert "'timestamp'" in errors[6]
    assert "stored offset 99" in errors[7]
    assert "not UTF-8" in errors[8]
    assert errors[9] == "empty line"
    # a range starting at a bad record still returns it
    assert r.read({3: 3}, {3: 4}) == [records[3]]


def test_partial_last_line_is_held_back_until_complete(tmp_path: Path) -> None:
    PartitionedLogWriter(tmp_path).append(0, [{"i": 0}])
    seg = _segment(tmp_path, 0, 1)
    seg.write_bytes(b'{"value": {"i": 1}}\n{"value": {"i"')
    r = PartitionedLogReader(tmp_path)
    assert r.end_offsets() == {0: 2}
    assert [x.value for x in r.read({0: 0})] == [{"i": 0}, {"i": 1}]
    assert r.read({0: 2}) == []
    with seg.open("ab") as f:
        f.write(b': 2}}')  # still no newline: still held back
    assert r.read({0: 2}) == []
    with seg.open("ab") as f:
        f.write(b"\n")
    assert r.end_offsets() == {0: 3}
    assert r.read({0: 2}) == [LogRecord(0, 2, None, {"i": 2})]
    # the writer continues after the completed line
    assert PartitionedLogWriter(tmp_path).append(0, [{"i": 3}]) == [3]


def test_truncated_line_in_a_closed_segment_is_a_bad_record(tmp_path: Path) -> None:
    root = tmp_path
    PartitionedLogWriter(root).create_partition(0)
    _segment(root, 0, 0).write_bytes(b'{"value": {"i": 0}}\n{"value": {"i"')
    _segment(root, 0, 2).write_bytes(b'{"value": {"i": 2}}\n')
    records = PartitionedLogReader(root).read({0: 0})
    assert [x.offset for x in records] == [0, 1, 2]
    assert records[1].value is None
    assert records[1].error is not None and "truncated line" in records[1].error


def test_new_partition_appears_mid_stream(tmp_path: Path) -> None:
    w = PartitionedLogWriter(tmp_path)
    w.append(0, [{"i": 0}])
    r = PartitionedLogReader(tmp_path)
    assert r.partitions() == [0]
    w.append(4, [{"i": 1}])  # created by the writer: listed in the manifest
    assert r.partitions() == [0, 4]
    assert r.end_offsets() == {0: 1, 4: 1}
    # created by another producer: only a directory, not in the manifest
    (tmp_path / "partition=7").mkdir()
    _segment(tmp_path, 7, 0).write_text('{"value": {"i": 2}}\n')
    (tmp_path / "partition=x").mkdir()  # not a partition name: ignored
    assert r.partitions() == [0, 4, 7]
    assert r.read({7: 0}) == [LogRecord(7, 0, None, {"i": 2})]
    # a writer opened later adopts it and continues its offsets
    assert PartitionedLogWriter(tmp_path).append(7, [{"i": 3}]) == [1]


def test_root_with_only_partition_dirs_is_a_log(tmp_path: Path) -> None:
    (tmp_path / "partition=0").mkdir()
    _segment(tmp_path, 0, 0).write_text('{"value": {"i": 0}}\n')
    assert PartitionedLogReader(tmp_path).end_offsets() == {0: 1}
    w = PartitionedLogWriter(tmp_path)
    assert w.append(0, [{"i": 1}]) == [1]
    assert json.loads((tmp_path / MANIFEST_NAME).read_text())["partitions"] == [0]


def test_no_temporary_files_are_left_behind(tmp_path: Path) -> None:
    w = PartitionedLogWriter(tmp_path, format="parquet")
    w.append(0, [{"i": 0}])
    with pytest.raises(ConfigurationError):
        w.append(0, [{"bad": object()}])  # rejected before anything is written
    assert os.listdir(tmp_path / "partition=0") == [f"segment-{0:020d}.parquet"]
    assert w.end_offsets() == {0: 1}


def _param(exc: pytest.ExceptionInfo[ConfigurationError]) -> str:
    return exc.value.parameter


def test_configuration_errors_name_the_parameter(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as e:
        PartitionedLogReader(tmp_path / "missing")
    assert _param(e) == "root" and "does not exist" in str(e.value)

    with pytest.raises(ConfigurationError) as e:
        PartitionedLogWriter(tmp_path / "log", format="csv")
    assert _param(e) == "format" and "csv" in str(e.value)
    assert not (tmp_path / "log").exists()

    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigurationError) as e:
        PartitionedLogReader(tmp_path / "empty")
    assert _param(e) == "root" and "not a lowwater log" in str(e.value)

    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("hello")
    with pytest.raises(ConfigurationError) as e:
        PartitionedLogReader(stranger)
    assert _param(e) == "root"
    with pytest.raises(ConfigurationError) as e:
        PartitionedLogWriter(stranger)
    assert _param(e) == "root"

    w = PartitionedLogWriter(tmp_path / "log")
    for call in (lambda: w.append(-1, [{}]), lambda: w.create_partition(-2),
                 lambda: w.append(True, [{}])):
        with pytest.raises(ConfigurationError) as e:
            call()
        assert _param(e) == "partition"
    with pytest.raises(ConfigurationError) as e:
        w.append(0, [{}, {}], [1])
    assert _param(e) == "timestamps"
    with pytest.raises(ConfigurationError) as e:
        w.append(0, ["not a dict"])  # type: ignore[list-item]
    assert _param(e) == "values"
    with pytest.raises(ConfigurationError) as e:
        PartitionedLogWriter(tmp_path / "log", format="parquet")
    assert _param(e) == "format" and "jsonl" in str(e.value)

    w.append(0, [{}])
    r = PartitionedLogReader(tmp_path / "log")
    for kwargs, parameter in [
        ({"start_offsets": {-1: 0}}, "start_offsets"),
        ({"start_offsets": {0: -1}}, "start_offsets"),
        ({"start_offsets": {5: 0}}, "start_offsets"),  # unknown partition
        ({"start_offsets": {0: 1}, "end_offsets": {0: 0}}, "end_offsets"),
        ({"start_offsets": {0: 0}, "max_records_per_partition": -1},
         "max_records_per_partition"),
    ]:
        with pytest.raises(ConfigurationError) as e:
            r.read(**kwargs)  # type: ignore[arg-type]
        assert _param(e) == parameter, kwargs

    (tmp_path / "log" / MANIFEST_NAME).write_text('{"format": "avro", "partitions": []}')
    with pytest.raises(ConfigurationError) as e:
        PartitionedLogReader(tmp_path / "log")
    assert _param(e) == "format"


def test_missing_or_overlapping_offsets_raise_corrupt_log(tmp_path: Path) -> None:
    w = PartitionedLogWriter(tmp_path)
    w.append(0, [{"i": 0}, {"i": 1}])
    w.append(0, [{"i": 2}])
    r = PartitionedLogReader(tmp_path)
    _segment(tmp_path, 0, 5).write_text('{"value": {"i": 5}}\n')  # offsets 3, 4 missing
    assert r.read({0: 0}, {0: 2}) == [LogRecord(0, 0, None, {"i": 0}),
                                        LogRecord(0, 1, None, {"i": 1})]
    with pytest.raises(CorruptLogError, match="missing"):
        r.read({0: 0})
    _segment(tmp_path, 0, 5).unlink()
    _segment(tmp_path, 0, 1).write_text('{"value": {"i": 1}}\n')  # overlaps segment 0
    with pytest.raises(CorruptLogError, match="overlapping"):
        r.read({0: 0})


def test_segments_get_strictly_increasing_millisecond_mtimes_in_write_order(tmp_path: Path) -> None:
    """Spark's file source reads new files in order of their mtime in ms: segments written
    within one millisecond (here, by two writers) must still be ordered."""
    first = PartitionedLogWriter(tmp_path / "log", "jsonl", fsync=False)
    for i in range(5):
        first.append(i % 2, [{"i": i}])
    second = PartitionedLogWriter(tmp_path / "log", fsync=False)
    second.append(0, [{"i": 5}])
    segments = sorted((tmp_path / "log").glob("partition=*/segment-*"), key=lambda q: q.stat().st_mtime_ns)
    order = [json.loads(q.read_text())["value"]["i"] for q in segments]
    assert order == [0, 1, 2, 3, 4, 5]
    millis = [q.stat().st_mtime_ns // 1_000_000 for q in segments]
    assert all(a < b for a, b in itertools.pairwise(millis)), millis


@pytest.mark.parametrize("fmt", FORMATS)
def test_reading_the_head_of_a_big_segment_decodes_only_the_head(tmp_path: Path, fmt: str) -> None:
    """A source's check before a run reads the first 200 records of each partition on the
    driver: that must not turn a whole segment into Python objects (at 250,000 records per
    segment it took 165 MB of the driver's memory). Rows and counts stay exact."""
    import tracemalloc

    n = 20_000
    w = PartitionedLogWriter(tmp_path, format=fmt)
    w.append(0, [{"k": f"key-{i}", "v": i} for i in range(n)])
    w.append(0, [{"k": "last", "v": -1}])
    r = PartitionedLogReader(tmp_path)
    tracemalloc.start()
    try:
        head = r.read({0: 0}, max_records_per_partition=10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [x.value for x in head] == [{"k": f"key-{i}", "v": i} for i in range(10)]
    assert [x.offset for x in r.read({0: n - 2}, {0: n + 1})] == [n - 2, n - 1, n]
    assert r.end_offsets() == {0: n + 1}
    # the whole segment as Python values is some 2.5 times its JSONL file (4 MB here); a JSONL
    # segment's bytes are read once, whole, to count its lines
    size = next((tmp_path / "partition=0").glob(f"segment-{0:020d}.*")).stat().st_size
    assert peak < (1.3 * size if fmt == "jsonl" else 300_000), (peak, size)


def test_a_file_uri_is_the_directory_and_another_scheme_is_refused_by_name(tmp_path: Path) -> None:
    """Spark users write ``file:///shared/log``; ``Path`` took it for a relative directory named
    ``file:`` and the reader said the log "does not exist"."""
    w = PartitionedLogWriter(f"file://{tmp_path}/log", format="jsonl")
    w.append(1, [{"i": 7}])
    assert (tmp_path / "log" / "partition=1").is_dir() and not Path("file:").exists()
    for root in (f"file://{tmp_path}/log", f"file:{tmp_path}/log", f"file://localhost{tmp_path}/log"):
        assert PartitionedLogReader(root).end_offsets() == {1: 1}, root
    for root, said in (("hdfs://namenode:8020/log", "not a hdfs: URI"), ("s3a://bucket/log", "not a s3a: URI"),
                       ("file://otherhost/log", "another host (otherhost)")):
        with pytest.raises(ConfigurationError) as e:
            PartitionedLogReader(root)
        assert _param(e) == "root" and said in str(e.value), str(e.value)


def test_a_reader_kept_for_a_query_counts_one_segment_per_partition(tmp_path: Path) -> None:
    """The record-count cache held every segment that was ever a partition's last, for as long as
    the query's reader lived (about 290 bytes each; a producer appending every 5 s, 518k a month)."""
    writer = PartitionedLogWriter(tmp_path, "jsonl")
    writer.create_partition(0)
    writer.create_partition(1)
    reader = PartitionedLogReader(tmp_path)
    for i in range(30):
        writer.append(i % 2, [{"k": i}, {"k": i + 1}])
        assert reader.end_offsets() == {0: 2 * ((i + 2) // 2), 1: 2 * ((i + 1) // 2)}
    assert len(reader._log._counts) == 2
    with open(sorted((tmp_path / "partition=1").glob("segment-*"))[-1], "a") as f:  # a producer's own append
        f.write('{"timestamp": null, "value": {"k": 99}}\n')
    assert reader.end_offsets() == {0: 30, 1: 31}
