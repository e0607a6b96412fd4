"""A partitioned log's records as Arrow batches of typed columns: exactly the records
:class:`~lowwater.io.PartitionedLogReader` and :func:`~lowwater.io.fields.read_element` make.

:func:`to_arrow` converts decoded records. :func:`read_arrow` reads a range and takes a
fast path where it can prove the answer is the same: a JSON-lines segment's lines are
parsed by Arrow's JSON reader with the envelope and the declared fields as an explicit
schema, and the result is used only if every line starts with ``{`` and is valid UTF-8, Arrow parsed each line
as one row, every ``value`` is an object, every stored ``offset``/``partition`` matches the
position and directory, and every ``DOUBLE`` is finite. Arrow refuses every other
disagreement with the codec (a type mismatch, a non-object line, a duplicate key, an
integer out of range, ``NaN``), and then those lines go through the codec. Fields declared
``TIMESTAMP``, ``DATE``, ``FLOAT`` or a small integer type always take the codec. A
Parquet segment's ``value`` texts take the same fast path, one text per line, when each
starts with ``{`` and has no line break; its ``offset``, ``partition`` and ``timestamp``
columns are used as typed when they are integers (any other type takes the codec). One
known difference: a line whose *undeclared* fields nest more deeply than Python's recursion
limit (about 1,000 levels) is a dead letter through the codec but a record on the fast path.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from lowwater.io.fields import FieldError, column_type, decimal_type, has_decimals, read_element
from lowwater.io.log import LogRecord, PartitionedLogReader

__all__ = ["ARROW_ROWS", "arrow_schema", "elements_to_arrow", "read_arrow", "to_arrow"]

ARROW_ROWS = 65_536
"""The most rows in one Arrow batch."""

_FAST_TYPES = frozenset({"STRING", "BIGINT", "DOUBLE", "BOOLEAN"})


def _arrow_type(declared: str) -> Any:
    import pyarrow as pa

    places = decimal_type(declared)
    if places is not None:
        return pa.decimal128(*places)
    return {"BIGINT": pa.int64(), "INT": pa.int32(), "SMALLINT": pa.int16(), "TINYINT": pa.int8(),
            "DOUBLE": pa.float64(), "FLOAT": pa.float32(), "STRING": pa.string(),
            "BOOLEAN": pa.bool_()}[column_type(declared)]


def arrow_schema(fields: Sequence[tuple[str, str]]) -> Any:
    """``_partition, _offset, _source_ts, _seq``, the fields, ``_corrupt``."""
    import pyarrow as pa

    return pa.schema([("_partition", pa.int32()), ("_offset", pa.int64()), ("_source_ts", pa.int64()),
                      ("_seq", pa.int64()), *((n, _arrow_type(t)) for n, t in fields), ("_corrupt", pa.string())])


def to_arrow(records: Sequence[LogRecord], fields: Sequence[tuple[str, str]]) -> Any:
    """Decoded records as one Arrow batch; ``_corrupt`` is the reason a record is not an element."""
    rows: list[tuple[int, int | None, int | None, int | None, Mapping[str, Any] | None, str | None]] = []
    for rec in records:
        element, reason = None, rec.error
        if rec.value is not None:
            try:
                element, reason = read_element(rec.value, fields), None
            except FieldError as e:
                reason = str(e)
        rows.append((rec.partition, rec.offset, rec.timestamp, None, element, reason))
    return elements_to_arrow(rows, fields)


def _fast(lines: list[bytes], partition: int, first: int, fields: Sequence[tuple[str, str]]) -> Any | None:
    """The lines (offsets ``first, first + 1, ...``) as an Arrow table, or ``None``: use the codec."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    # Arrow reads a stream of JSON values, not one per line: a line with two objects and an object
    # split over two lines would still make n rows, each at the wrong offset. A line that starts
    # with "{" and ends with "}" holds no part of another line's object, so then n rows are n lines
    if not all(line[:1] == b"{" and (line[-1:] == b"}" or line.rstrip(b" \t\r")[-1:] == b"}") for line in lines):
        return None  # not an object line (Arrow 26 crashes on a block of only "null" lines)
    data = b"\n".join(lines) + b"\n"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    value = pa.struct([(n, _arrow_type(t)) for n, t in fields])
    schema = pa.schema([("partition", pa.int64()), ("offset", pa.int64()), ("timestamp", pa.int64()),
                        ("value", value)])
    try:
        table = pj.read_json(io.BytesIO(data), read_options=pj.ReadOptions(use_threads=False, block_size=len(data) + 1),
                             parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    n = len(lines)
    if table.num_rows != n or table.column("value").null_count:
        return None  # a blank line (Arrow skips it), or a line with no value object
    positions = pa.array(range(first, first + n), pa.int64())
    for name, expected in (("offset", positions), ("partition", pa.scalar(partition, pa.int64()))):
        col = table.column(name)
        if col.null_count < n and not pc.all(pc.or_kleene(pc.is_null(col), pc.equal(col, expected))).as_py():
            return None
    values = table.column("value").combine_chunks()
    out = {"_partition": pa.array([partition] * n, pa.int32()), "_offset": positions,
           "_source_ts": table.column("timestamp").combine_chunks(), "_seq": pa.nulls(n, pa.int64())}
    for i, (name, declared) in enumerate(fields):
        col = values.field(i)
        if declared == "DOUBLE" and not pc.all(pc.or_kleene(pc.is_null(col), pc.is_finite(col))).as_py():
            return None
        out[name] = col
    out["_corrupt"] = pa.nulls(n, pa.string())
    return pa.Table.from_pydict(out, schema=arrow_schema(fields))


def _fast_parquet(path: Any, partition: int, first: int, nxt: int | None, pos: int, stop: int,
                  fields: Sequence[tuple[str, str]]) -> Any | None:
    """Rows ``pos <= offset < stop`` of a Parquet segment starting at ``first`` as an Arrow table,
    or ``None``: use the codec. The ``value`` texts are parsed by Arrow's JSON reader, one per
    line, under the conditions of :func:`_fast`; the envelope columns are taken as typed."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception:  # a damaged file: the codec says so
        return None
    if nxt is not None and table.num_rows != nxt - first:
        return None  # a closed segment must line up
    if "value" not in table.column_names or not pa.types.is_string(table.schema.field("value").type):
        return None
    table = table.slice(pos - first, stop - pos)
    n = table.num_rows
    if n != stop - pos:
        return None
    texts = table.column("value")
    if texts.null_count or not pc.all(pc.starts_with(texts, "{")).as_py() \
            or pc.any(pc.match_substring_regex(texts, "[\r\n]")).as_py():
        # not an object, or not one line each; with no newline in a value no object spans two,
        # so a value holding two objects makes one row too many, and the count check below sees it
        return None
    data = ("\n".join(texts.to_pylist()) + "\n").encode("utf-8")
    schema = pa.schema([(name, _arrow_type(t)) for name, t in fields])
    try:
        values = pj.read_json(io.BytesIO(data),
                              read_options=pj.ReadOptions(use_threads=False, block_size=len(data) + 1),
                              parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if values.num_rows != n:
        return None
    positions = pa.array(range(pos, stop), pa.int64())
    envelope: dict[str, Any] = {}
    for name in ("offset", "partition", "timestamp"):
        if name not in table.column_names:
            continue
        col = table.column(name)
        if not pa.types.is_integer(col.type):
            return None  # the codec judges other types
        try:
            envelope[name] = col.cast(pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    for name, expected in (("offset", positions), ("partition", pa.scalar(partition, pa.int64()))):
        col = envelope.get(name)
        if col is not None and col.null_count < n \
                and not pc.all(pc.or_kleene(pc.is_null(col), pc.equal(col, expected))).as_py():
            return None
    stamps = envelope.get("timestamp")
    out = {"_partition": pa.array([partition] * n, pa.int32()), "_offset": positions,
           "_source_ts": stamps.combine_chunks() if stamps is not None else pa.nulls(n, pa.int64()),
           "_seq": pa.nulls(n, pa.int64())}
    for name, declared in fields:
        col = values.column(name).combine_chunks()
        if declared == "DOUBLE" and not pc.all(pc.or_kleene(pc.is_null(col), pc.is_finite(col))).as_py():
            return None
        out[name] = col
    out["_corrupt"] = pa.nulls(n, pa.string())
    return pa.Table.from_pydict(out, schema=arrow_schema(fields))


def read_arrow(reader: PartitionedLogReader, partition: int, start: int, end: int,
               fields: Sequence[tuple[str, str]]) -> Iterator[Any]:
    """Records ``start <= offset < end`` of ``partition`` as Arrow batches (see the module)."""
    if start >= end:
        return
    fast = all(t in _FAST_TYPES for _, t in fields)
    exact = has_decimals(fields)  # a DECIMAL field reads numbers' texts
    segments = reader.segment_files(partition)
    bounds = [f for f, _ in segments] + [None]
    ok = fast and segments and segments[0][0] <= start
    pos = start
    for (first, path), nxt in zip(segments, bounds[1:], strict=True):
        if pos >= end:
            break
        if nxt is not None and nxt <= pos:
            continue
        stop = end if nxt is None else min(end, nxt)
        table = None
        if ok and path.suffix == ".jsonl":
            lines = path.read_bytes().split(b"\n")
            tail = lines.pop()
            whole = nxt is None or (not tail and len(lines) == nxt - first)  # a closed segment must line up
            if whole and first + len(lines) >= stop:
                table = _fast(lines[pos - first:stop - first], partition, pos, fields)
        elif ok and path.suffix == ".parquet":
            table = _fast_parquet(path, partition, first, nxt, pos, stop, fields)
        if table is not None:
            yield from table.to_batches(max_chunksize=ARROW_ROWS)
        else:  # the codec: also raises CorruptLogError for segments that do not line up
            for lo in range(pos, stop, ARROW_ROWS):
                hi = min(stop, lo + ARROW_ROWS)
                yield to_arrow(reader.read({partition: lo}, {partition: hi}, exact_numbers=exact), fields)
        pos = stop
    if pos < end:
        yield to_arrow(reader.read({partition: pos}, {partition: end}, exact_numbers=exact), fields)


def elements_to_arrow(rows: Sequence[tuple[int, int | None, int | None, int | None, Mapping[str, Any] | None,
                                           str | None]],
                      fields: Sequence[tuple[str, str]]) -> Any:
    """``(partition, offset, source_ts, seq, element, reason)`` rows, each element already read
    (:func:`~lowwater.io.fields.read_element`; ``None`` with the reason of a dead letter), as one
    Arrow batch of :func:`arrow_schema`."""
    import pyarrow as pa

    arrays = [
        pa.array([r[0] for r in rows], pa.int32()),
        pa.array([r[1] for r in rows], pa.int64()),
        pa.array([r[2] for r in rows], pa.int64()),
        pa.array([r[3] for r in rows], pa.int64()),
        *(pa.array([None if r[4] is None else r[4][name] for r in rows], _arrow_type(t)) for name, t in fields),
        pa.array([r[5] for r in rows], pa.string()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(fields))
