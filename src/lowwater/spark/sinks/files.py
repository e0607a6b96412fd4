"""Directory sinks: one sub-directory per micro-batch, replaced when a batch is replayed.

On Spark the executors write each batch's DataFrame (any Spark file format) to a temporary
directory, which is then renamed to ``batch=<id>`` through Hadoop's FileSystem: the path may
be local or any Hadoop URI. The reference runtime's rows are written from the process.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lowwater.core.errors import ConfigurationError
from lowwater.spark import faults
from lowwater.spark.sinks.base import DataFrameSink, checked_empty_batches, to_dict

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["DirectorySink", "read_directory", "to_dict"]


_SPARK_FORMAT = {"parquet": "parquet", "jsonl": "json", "json": "json", "orc": "orc"}


class DirectorySink(DataFrameSink):
    """Writes each batch to ``<path>/batch=<id>/``, atomically, replacing a replay's.

    ``fmt`` is a Spark file format: ``parquet``, ``json`` (``jsonl`` is the same: JSON
    lines) or ``orc`` (CSV has no struct type for the ``window`` column).
    On Spark, :meth:`write` has the executors write the batch's DataFrame into
    ``<path>/.batch=<id>.tmp`` and renames it to ``batch=<id>`` (Hadoop FileSystem, so
    ``path`` may be ``hdfs://...``; a plain path is on Spark's default file system, as in
    ``df.write``); the reference runtime's rows are written as one file
    ``part.jsonl`` or ``part.parquet`` (local paths). A replayed batch id rewrites the same
    directory, so the sink's contents are exactly-once. An empty batch writes an empty one,
    unless ``empty_batches=False``: then a batch known to have no rows for this output (no
    window fired; nothing late) writes no directory and runs no Spark job, as Spark's own file
    sink writes no file for it. Use it with an interval trigger, which would otherwise leave a
    directory per trigger.
    """

    reads_every_row = True  # one df.write (DataFrameSink.reads_every_row)

    def __init__(self, path: str | os.PathLike[str],
                 fmt: Literal["parquet", "jsonl", "json", "orc"] = "parquet", empty_batches: bool = True) -> None:
        if fmt not in _SPARK_FORMAT:
            raise ConfigurationError("fmt", f"must be one of {sorted(_SPARK_FORMAT)}, got {fmt!r}")
        self.empty_batches = checked_empty_batches(empty_batches)
        self.location = str(path)
        self.path = Path(path)
        self.fmt = fmt

    def __repr__(self) -> str:
        return f"DirectorySink({self.location!r}, {self.fmt!r})"

    def batch_target(self) -> str:
        """The directory (a plain path made absolute), whatever the format: ``batch=<id>/`` is one."""
        from lowwater.util.files import is_uri

        return f"the directory {self.location if is_uri(self.location) else os.path.abspath(self.location)}"

    def write(self, df: DataFrame, batch_id: int) -> None:
        """Spark writes ``df`` from the executors; the directory then replaces ``batch=<id>``."""
        from lowwater.spark.fs import checkpoint_fs, join, resolve

        location = resolve(self.location, df.sparkSession)  # where Spark writes a plain path: fs.defaultFS
        fs = checkpoint_fs(location, df.sparkSession)
        tmp, final = join(location, f".batch={batch_id}.tmp"), join(location, f"batch={batch_id}")
        df.write.mode("overwrite").format(_SPARK_FORMAT[self.fmt]).save(tmp)
        faults.at("dir_sink_write", batch_id)
        fs.replace_dir(tmp, final)

    def write_batch(self, batch_id: int, rows: Sequence[Any]) -> None:
        if not rows and not self.empty_batches:  # as on Spark: no directory for a batch without rows
            return
        self.path.mkdir(parents=True, exist_ok=True)
        final = self.path / f"batch={batch_id}"
        tmp = self.path / f".batch={batch_id}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        records = [to_dict(r) for r in rows]
        if self.fmt in ("jsonl", "json"):
            with open(tmp / "part.jsonl", "w") as f:
                for r in records:
                    f.write(json.dumps(r, default=str) + "\n")
        elif self.fmt != "parquet":
            raise ConfigurationError("fmt", f"{self.fmt!r} is written by Spark only; use parquet or jsonl here")
        elif records:
            import pyarrow as pa
            import pyarrow.parquet as pq

            # every row's fields, in first-seen order: from_pylist alone takes the first row's names
            # and drops the fields later rows add (a dead letter's "file", a dict after a scalar)
            names = list(dict.fromkeys(k for r in records for k in r))
            pq.write_table(pa.Table.from_pylist([{n: r.get(n) for n in names} for r in records]), tmp / "part.parquet")
        faults.at("dir_sink_write", batch_id)
        (tmp / "_SUCCESS").write_text(str(len(records)))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)


def read_directory(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every row a :class:`DirectorySink` wrote (JSON or Parquet, local paths), in batch order."""
    root = Path(path)
    out: list[dict[str, Any]] = []
    dirs = sorted(root.glob("batch=*"), key=lambda p: int(p.name.split("=")[1]))
    for d in dirs:
        for f in sorted(d.iterdir()):
            if f.name.startswith((".", "_")):
                continue
            if f.suffix in (".jsonl", ".json"):
                out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
            elif f.suffix == ".parquet":
                import pyarrow.parquet as pq

                out += pq.read_table(f).to_pylist()
    return out
