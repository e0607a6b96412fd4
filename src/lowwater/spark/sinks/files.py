"""Directory sinks: one sub-directory per micro-batch, replaced when a batch is replayed.

On Spark the executors write each batch's DataFrame (any Spark file format) to a temporary
directory, which is then renamed to ``batch=<id>`` through Hadoop's FileSystem: the path may
be local or any Hadoop URI. The reference runtime's rows are written from the process.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lowwater.core.errors import ConfigurationError
from lowwater.metrics.dead_letters import spark_json
from lowwater.spark import faults
from lowwater.spark.sinks.base import DataFrameSink, checked_empty_batches, to_dict

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["DirectorySink", "read_directory", "to_dict"]


_SPARK_FORMAT = {"parquet": "parquet", "jsonl": "json", "json": "json", "orc": "orc"}
_JOB_FILE = "_lowwater_job"
"""In a directory a Spark job's :class:`DirectorySink` writes: the job's id (:meth:`DirectorySink.bind_job`)."""


class DirectorySink(DataFrameSink):
    """Writes each batch to ``<path>/batch=<id>/``, atomically, replacing a replay's.

    ``fmt`` (or ``format=``, as Spark spells it) is a Spark file format: ``parquet`` (the
    default), ``json`` (``jsonl`` is the same: JSON lines) or ``orc`` (CSV has no struct type for
    the ``window`` column); naming two different formats is a ``ConfigurationError``.
    On Spark, :meth:`write` has the executors write the batch's DataFrame into
    ``<path>/.batch=<id>.tmp`` and renames it to ``batch=<id>`` (Hadoop FileSystem, so
    ``path`` may be ``hdfs://...``; a plain path is on Spark's default file system, as in
    ``df.write``); the reference runtime's rows are written as one file
    ``part.jsonl`` or ``part.parquet`` (local paths), window results with Spark's ``window``
    struct as on Spark. A replayed batch id rewrites the same
    directory, so the sink's contents are exactly-once. An empty batch writes an empty one,
    unless ``empty_batches=False``: then a batch known to have no rows for this output (no
    window fired; nothing late) writes no directory and runs no Spark job, as Spark's own file
    sink writes no file for it. Use it with an interval trigger, which would otherwise leave a
    directory per trigger. A Parquet batch written from rows keeps the columns' types of the
    batches before it, so the directories can be read together (``mergeSchema`` for the columns
    added later); a batch whose values change a column's type fails with
    :class:`~lowwater.core.errors.OutputSchemaError`, naming the field.
    """

    reads_every_row = True  # one df.write (DataFrameSink.reads_every_row)

    def __init__(self, path: str | os.PathLike[str],
                 fmt: Literal["parquet", "jsonl", "json", "orc"] | None = None, empty_batches: bool = True, *,
                 format: Literal["parquet", "jsonl", "json", "orc"] | None = None) -> None:
        # ``format`` is Spark's spelling (df.write.format), which raised a TypeError; neither: Parquet.
        # Naming two formats is an error, also when one is "parquet": until session 46 the default
        # could not be told from it, and DirectorySink(p, "parquet", format="json") wrote JSON
        if fmt is not None and format is not None and _SPARK_FORMAT.get(fmt, fmt) != _SPARK_FORMAT.get(format, format):
            raise ConfigurationError("format", f"the format is given twice: fmt={fmt!r} and format={format!r}")
        fmt = fmt if fmt is not None else format if format is not None else "parquet"
        if fmt not in _SPARK_FORMAT:
            raise ConfigurationError("fmt", f"must be one of {sorted(_SPARK_FORMAT)}, got {fmt!r}")
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            raise ConfigurationError("path", f"expected a directory's path or URI, got {path!r}")
        self.empty_batches = checked_empty_batches(empty_batches)
        self.location = str(path)
        self.path = Path(path)
        self.fmt = fmt

    def __repr__(self) -> str:
        return f"DirectorySink({self.location!r}, {self.fmt!r})"

    def batch_target(self) -> str:
        """The directory (one spelling of it: :func:`~lowwater.util.files.same_place`), whatever the
        format: ``batch=<id>/`` is one."""
        from lowwater.util.files import same_place

        return f"the directory {same_place(self.location)}"

    def bind_job(self, job_id: str | None, resumes: bool = True) -> None:
        """Refuse a directory that holds another job's batches. A new checkpoint's batch ids start
        again at 0: its ``batch=0/`` replaced the old job's, and the old job's later batches stayed
        beside the new ones, one directory of two jobs' rows, without a word. The job's id is kept
        in ``_lowwater_job`` (readers skip ``_`` files). A reference run is a new job every time: it
        rewrote ``batch=0..k`` and left the earlier run's later batches beside them, two runs' rows
        in one directory, without a word. A checkpoint without an id (None) is not checked."""
        from lowwater.util.files import is_uri

        if not is_uri(self.location):  # checked on both runtimes, before a batch
            blocking = next((p for p in (self.path, *self.path.parents) if p.is_file()), None)
            if blocking is not None:  # a file above it: NotADirectoryError at the job marker's write
                raise self._a_file(None if blocking == self.path else blocking)
        if job_id is None:
            return
        from pyspark.sql import SparkSession

        from lowwater.spark.fs import checkpoint_fs, join, resolve

        spark = SparkSession.getActiveSession()
        location = resolve(self.location, spark) if spark is not None else self.location
        fs = checkpoint_fs(location, spark)
        if fs.is_file(location):
            raise self._a_file()
        marker = join(location, _JOB_FILE)
        recorded = fs.read(marker)
        if recorded is not None and recorded.decode().strip() == job_id:
            return
        names = fs.names(location)
        if recorded is not None or any(n.startswith("batch=") for n in names):
            raise ConfigurationError(
                "path", f"{self.location} holds the batches of another job (another checkpoint): this job's "
                "batch ids start at 0 and would replace them, beside the old job's later ones. Hint: give the "
                "sink a new directory, or delete this one if its rows are no longer wanted")
        # another writer's files (a Spark job's part files): a reader of the directory found this
        # job's batch=<id>/ beside them and read lowwater's rows alone, the others hidden by
        # partition discovery, without a word (a user probe, session 58). Hidden names are readers'
        theirs = sorted(n for n in names if not n.startswith(("_", ".")))
        if theirs:
            raise ConfigurationError(
                "path", f"{self.location} holds files another writer made ({', '.join(theirs[:3])}"
                f"{', ...' if len(theirs) > 3 else ''}): this job's batch=<id>/ directories beside them would hide "
                "them from a reader of the directory (Spark's partition discovery reads one kind). Hint: give "
                "the sink a new directory")
        fs.mkdirs(location)
        fs.write_atomic(marker, job_id.encode())

    def _a_file(self, above: Path | None = None) -> ConfigurationError:
        what = f"is under {above}, a file," if above is not None else "is a file,"
        return ConfigurationError("path", f"{self.location} {what} not a directory: a DirectorySink writes "
                                  "a directory per batch under its path. Hint: give it a directory")

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
        if self.fmt not in ("jsonl", "json", "parquet"):
            raise ConfigurationError("fmt", f"{self.fmt!r} is written by Spark only; use parquet or jsonl here")
        records = [_with_window(to_dict(r), text=self.fmt != "parquet") for r in rows]
        # settled before anything is written: a batch whose types do not fit leaves no directory
        table = _settled_table(records, self._kept_schema(batch_id), f"{self!r}", batch_id) \
            if self.fmt == "parquet" and records else None
        self.path.mkdir(parents=True, exist_ok=True)
        final = self.path / f"batch={batch_id}"
        tmp = self.path / f".batch={batch_id}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        if self.fmt in ("jsonl", "json"):
            with open(tmp / "part.jsonl", "w") as f:
                for r in _kinds_settled(records):
                    f.write(spark_json(r) + "\n")  # as Spark writes a row: a Decimal a number
        elif table is not None:
            import pyarrow.parquet as pq

            pq.write_table(table, tmp / "part.parquet")
        faults.at("dir_sink_write", batch_id)
        (tmp / "_SUCCESS").write_text(str(len(records)))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)

    def _kept_schema(self, batch_id: int) -> Any:
        """The schema of the newest Parquet batch before ``batch_id`` (None if there is none): the
        columns the batches written so far have, which a batch's rows keep (:func:`_settled_table`)."""
        import pyarrow.parquet as pq

        if not self.path.is_dir():
            return None
        written = [(int(d.name.split("=", 1)[1]), d) for d in self.path.glob("batch=*")
                   if d.name.split("=", 1)[1].isdigit()]
        for _, d in sorted((b, d) for b, d in written if b < batch_id)[::-1]:
            if (d / "part.parquet").exists():
                return pq.read_schema(d / "part.parquet")
        return None


def _with_window(record: dict[str, Any], text: bool) -> dict[str, Any]:
    """A window result's row with Spark's ``window`` struct after its fields, as the Spark paths
    write it (``start`` and ``end`` as TIMESTAMPs, in UTC): datetimes for Parquet; for JSON lines
    the text Spark's JSON writer gives them in a session whose time zone is UTC, as lowwater's
    sessions are (``2024-05-01T10:00:00.000Z``, a null left out; in another zone Spark writes the
    same instant with that zone's offset, ``2024-05-01T15:30:00.000+05:30``). A bound past
    Python's dates (years 1 to 9999: a global window's) is null. Other rows are left as they are."""
    start, end = record.get("window_start"), record.get("window_end")
    if type(start) is not int or type(end) is not int or "window" in record:
        return record
    window = {"start": _timestamp(start, text), "end": _timestamp(end, text)}
    if text:  # as Spark's JSON writer: no null fields
        window = {k: v for k, v in window.items() if v is not None}
    return {**record, "window": window}


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _timestamp(ms: int, text: bool) -> Any:
    try:
        at = _EPOCH + datetime.timedelta(milliseconds=ms)
    except OverflowError:
        return None
    return f"{at:%Y-%m-%dT%H:%M:%S}.{at.microsecond // 1000:03d}Z" if text else at


def _settled_table(records: list[dict[str, Any]], kept: Any, what: str, batch_id: int) -> Any:
    """``records`` as an Arrow table whose columns keep the types of ``kept`` (the schema of the
    batches before, None for the first), as the Spark paths' DataFrames keep theirs
    (:meth:`~lowwater.spark.json_rows.JsonFrames.settled`): a field with no value but nulls (or
    empty lists) so far is no column yet, nor is such a field of a struct; a new field is a column
    after the others; a kept column the records lack is null; a DOUBLE column takes integers and
    a top-level STRING column any value (a list or struct as its JSON text); a field whose values
    no one type holds (a number and a word) is typed as Spark infers it (:func:`_column`); any other change
    of type raises
    :class:`~lowwater.core.errors.OutputSchemaError`, naming the field. Every record's fields count,
    in first-seen order (``from_pylist`` alone takes the first record's names and drops the fields
    later records add: a dead letter's "file", a dict after a scalar)."""
    import pyarrow as pa

    names = list(dict.fromkeys(k for r in records for k in r))
    table = pa.table({n: _column([r.get(n) for r in records]) for n in names})
    kept = kept if kept is not None else pa.schema([])
    windowed = all(n in table.column_names and pa.types.is_int64(table[n].type) for n in ("window_start", "window_end"))
    # a late row's partition (``partition``, or ``source_partition`` beside an element's own) and a dead
    # letter's are INTs, as on Spark (native_sql.late_ddl, dead_ddl)
    late = next((n for n in names if n.endswith("rejected_windows")), None)
    ints = {"fire_index"} if windowed else set()
    ints |= {late[:-len("rejected_windows")] + "partition"} if late else set()
    ints |= {"partition"} if "reason" in names and "offset" in names else set()
    fields, columns = [], []
    for name in [*kept.names, *(n for n in table.column_names if n not in kept.names)]:
        old = kept.field(name).type if name in kept.names else None
        new = _wide(_known(table[name].type)) if name in table.column_names else None
        if name in ints and pa.types.is_int64(new) and (old is None or pa.types.is_int32(old)):
            new = pa.int32()  # a window result's fire_index is an INT too (native_sql.result_ddl)
        # a STRING column takes any value, a list or struct as its JSON text (_texts below)
        target = old if old is not None and new is not None and pa.types.is_string(old) \
            else _merged(old, new, name, what, batch_id)
        if target is None:
            continue
        fields.append(pa.field(name, target))
        if name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, target))
        elif pa.types.is_string(target) and pa.types.is_nested(table[name].type):
            columns.append(_texts([r.get(name) for r in records]))
        else:
            columns.append(table[name].cast(target))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


_JSON_KINDS = (bool, int, float, str, Decimal, list, tuple, dict)


def _kinds_settled(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` with each field whose values no one type holds as Spark's JSON inference reads
    it (:func:`_inferred`), for a JSON lines batch: the values the keyed and general paths write
    for it (``[1, "a"]`` as ``["1", "a"]``). Fields of one type are left as they are."""
    import pyarrow as pa

    mixed: dict[str, list[Any]] = {}
    for name in dict.fromkeys(k for r in records for k in r):
        values = [r.get(name) for r in records]
        if not all(v is None or isinstance(v, _JSON_KINDS) for v in values):
            continue  # a value JSON has no kind for: spark_json writes it (its text), as before
        try:
            _typed(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # not OverflowError: JSON writes a long integer as it is
            mixed[name] = _inferred(values).to_pylist()
    if not mixed:
        return records
    return [{k: mixed[k][i] if k in mixed else v for k, v in r.items()} for i, r in enumerate(records)]


def _column(values: list[Any]) -> Any:
    """``values`` as an Arrow array; where no one type holds them all (a number and a word, a
    boolean and a number, an integer past 64 bits), as Spark's JSON inference reads such a field
    on the keyed path (:func:`_inferred`): a STRING array of their JSON texts (a string as it is),
    or lists or structs of them where the kinds part below the top."""
    import pyarrow as pa

    try:
        return _typed(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return _inferred(values)


def _typed(values: list[Any]) -> Any:
    """``values`` as the Arrow array of their one type (integers beside Decimals are Decimals);
    raises pyarrow's error where there is none."""
    import pyarrow as pa

    if any(type(v) is Decimal for v in values) and all(
            v is None or isinstance(v, Decimal) or (isinstance(v, int) and not isinstance(v, bool)) for v in values):
        values = [v if v is None or isinstance(v, Decimal) else Decimal(v) for v in values]  # integers beside them
    return pa.array(values)


def _inferred(values: list[Any]) -> Any:
    """``values``, which no one Arrow type holds, typed as Spark's JSON inference types their
    texts, at the deepest level where the kinds part: lists whose elements are of two kinds are a
    list of the elements' texts (``("a", 1, 0.5)`` is ``["a", "1", "0.5"]``, as the keyed and
    general paths write a PyFlink-style tuple), objects whose field is of two kinds a struct with
    that field a STRING; else (a number and a word, a list and an object) a STRING of the values'
    texts."""
    import pyarrow as pa

    present = [v for v in values if v is not None]
    if present and all(isinstance(v, (list, tuple)) for v in present):
        offsets = [0]
        for v in values:
            offsets.append(offsets[-1] + (0 if v is None else len(v)))
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), _column([x for v in present for x in v]),
                                        mask=pa.array([v is None for v in values]))
    if present and all(isinstance(v, dict) and all(type(k) is str for k in v) for v in present):
        names = list(dict.fromkeys(k for v in present for k in v))
        return pa.StructArray.from_arrays([_column([None if v is None else v.get(n) for v in values]) for n in names],
                                          names=names, mask=pa.array([v is None for v in values]))
    return _texts(values)


def _wide(t: Any) -> Any:
    """``t`` with its decimals as ``decimal128(38, scale)``: Arrow types a batch's Decimals by their
    digits (``decimal128(3, 2)`` for 1.25), which a later batch's larger total would contradict; the
    keyed path's DECIMAL columns are ``DECIMAL(38, s)`` too (:meth:`JsonFrames.settled`)."""
    import pyarrow as pa

    if t is None:
        return None
    if pa.types.is_decimal128(t):
        return pa.decimal128(38, t.scale)
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _wide(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(_wide(t.value_type))
    return t


def _texts(values: list[Any]) -> Any:
    """``values`` as a STRING array of their JSON texts (a string as it is, a null a null)."""
    import pyarrow as pa

    return pa.array([v if v is None or isinstance(v, str) else json.dumps(v, separators=(",", ":"), default=str)
                     for v in values], pa.string())


def _known(t: Any) -> Any:
    """``t`` without what says nothing of a type: a null, a list of nulls, a struct's such fields
    (None if nothing is left)."""
    import pyarrow as pa

    if pa.types.is_null(t):
        return None
    if pa.types.is_struct(t):
        known = [pa.field(f.name, k) for f in t for k in [_known(f.type)] if k is not None]
        return pa.struct(known) if known else None
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        value = _known(t.value_type)
        return None if value is None else pa.list_(value)
    return t


def _merged(old: Any, new: Any, path: str, what: str, batch_id: int) -> Any:
    """The type a column keeps that had ``old`` (None: none yet) when a batch gives it ``new``."""
    import pyarrow as pa

    from lowwater.core.errors import OutputSchemaError

    if old is None or new is None or old == new:
        return new if old is None else old
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        known = {f.name: f for f in old}
        merged = [pa.field(f.name, _merged(f.type, new.field(f.name).type if new.get_field_index(f.name) >= 0
                                           else None, f"{path}.{f.name}", what, batch_id)) for f in old]
        return pa.struct(merged + [f for f in new if f.name not in known])
    if pa.types.is_list(old) and pa.types.is_list(new):
        return pa.list_(_merged(old.value_type, new.value_type, f"{path}[]", what, batch_id))
    if (pa.types.is_floating(old) and pa.types.is_integer(new)) or (
            pa.types.is_string(old) and not pa.types.is_nested(new)) or (
            pa.types.is_decimal(old) and (pa.types.is_integer(new) or (
                pa.types.is_decimal(new) and new.scale <= old.scale))):
        return old  # a DECIMAL column takes integers and decimals of no more places, exactly
    if pa.types.is_decimal(old) and pa.types.is_decimal(new):
        raise OutputSchemaError(what, batch_id, path, _type_name(old), _type_name(new), fix=OutputSchemaError.PLACES)
    raise OutputSchemaError(what, batch_id, path, _type_name(old), _type_name(new))


def _type_name(t: Any) -> str:
    """An Arrow type as Spark SQL names the type it reads it as (``BIGINT``), else Arrow's name."""
    import pyarrow as pa

    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    return {"int64": "BIGINT", "int32": "INT", "double": "DOUBLE", "string": "STRING", "large_string": "STRING",
            "bool": "BOOLEAN"}.get(str(t), str(t).upper())


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
