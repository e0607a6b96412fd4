"""Directory sinks: one sub-directory per micro-batch, replaced when a batch is replayed."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from lowwater.api.sinks import Sink
from lowwater.core.errors import ConfigurationError
from lowwater.spark import faults

__all__ = ["DirectorySink", "read_directory", "to_dict"]


def to_dict(row: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(row) and not isinstance(row, type):
        return dataclasses.asdict(row)
    if isinstance(row, dict):
        return row
    if hasattr(row, "asDict"):
        return dict(row.asDict(recursive=True))
    return {"value": row}


class DirectorySink(Sink):
    """Writes each batch to ``<path>/batch=<id>/part.<fmt>``, atomically, replacing a replay's.

    ``fmt`` is ``parquet`` (via pyarrow) or ``jsonl``. A replayed batch id rewrites the same
    directory, so the sink's contents are exactly-once. An empty batch writes an empty marker.
    """

    def __init__(self, path: str | os.PathLike[str], fmt: Literal["parquet", "jsonl"] = "parquet") -> None:
        if fmt not in ("parquet", "jsonl"):
            raise ConfigurationError("fmt", f"must be 'parquet' or 'jsonl', got {fmt!r}")
        self.path = Path(path)
        self.fmt = fmt

    def open(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)

    def write_batch(self, batch_id: int, rows: Sequence[Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        final = self.path / f"batch={batch_id}"
        tmp = self.path / f".batch={batch_id}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        records = [to_dict(r) for r in rows]
        if self.fmt == "jsonl":
            with open(tmp / "part.jsonl", "w") as f:
                for r in records:
                    f.write(json.dumps(r, default=str) + "\n")
        elif records:
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pylist(records), tmp / "part.parquet")
        faults.at("dir_sink_write", batch_id)
        (tmp / "_SUCCESS").write_text(str(len(records)))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)


def read_directory(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every row a :class:`DirectorySink` wrote, in batch order."""
    root = Path(path)
    out: list[dict[str, Any]] = []
    dirs = sorted(root.glob("batch=*"), key=lambda p: int(p.name.split("=")[1]))
    for d in dirs:
        if (d / "part.jsonl").exists():
            out += [json.loads(line) for line in (d / "part.jsonl").read_text().splitlines()]
        elif (d / "part.parquet").exists():
            import pyarrow.parquet as pq

            out += pq.read_table(d / "part.parquet").to_pylist()
    return out
