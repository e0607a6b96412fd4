"""DirectorySink's rows from the reference runtime: a directory per batch, or only per batch with rows."""

from __future__ import annotations

import json
from pathlib import Path

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
