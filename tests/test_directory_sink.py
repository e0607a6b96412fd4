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
