"""The keyed path's outputs for DataFrame sinks: Python values as JSON rows, and those rows as a
DataFrame whose columns keep their types from batch to batch, its schema inferred by Spark only
when the batch's rows have shapes not seen before.

Stage B (:mod:`lowwater.spark.keyed`) writes each output value a DataFrame sink takes as one
JSON object (:func:`to_json`) and reports, per output kind, the set of the objects' *shapes*
(:func:`shape`). Spark's JSON schema inference reads each document's structure and the kinds of
its values (a ``long``, an integer of ``d`` digits beyond it, a floating-point number, a string,
a boolean, a null, an array, an object and its field names) and merges what it finds over the
rows with a merge that is commutative, associative and idempotent: the schema it infers is a
function of the *set* of the rows' shapes. So :class:`JsonFrames` runs Spark's inference (a
job over every row) the first time a set of shapes comes, and keeps the schema for a later
batch with the same set: one job fewer for each output a DataFrame sink takes. A bucket that
meets more distinct shapes than :data:`MAX_SHAPES` reports none, and its batch infers as before.

A batch's own schema is not its DataFrame's: the output keeps one schema, as a streaming
DataFrame has one, kept in the checkpoint with the batch's state. A batch may add columns to it
and may not change a column's type (:meth:`JsonFrames.settled`), so what a sink writes batch by
batch (a table, files read together) has one type per column."""

from __future__ import annotations

import base64
import dataclasses
import json
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from lowwater.core.errors import OutputSchemaError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["MAX_SHAPES", "JsonFrames", "document", "element_seed", "field_names", "json_row", "late_document",
           "late_row", "merge_orders", "merge_shapes", "reported", "settled_rows", "shape", "to_dict", "to_json"]

MAX_SHAPES = 32
"""Distinct shapes of one output kind a bucket reports at most; beyond it, none (infer)."""

_LONG = 1 << 63


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _json_default(o: Any) -> Any:
    """What the encoder writes of a value JSON has no kind for: a dataclass's fields, bytes in base64
    (as Spark's ``to_json`` writes a BINARY, and ``from_json`` reads one back), else the text."""
    names = _FIELD_NAMES.get(type(o))
    if names is None:
        if isinstance(o, (bytes, bytearray)):
            return base64.b64encode(o).decode("ascii")
        if not dataclasses.is_dataclass(o) or isinstance(o, type):
            return str(o)
        names = _FIELD_NAMES[type(o)] = tuple(f.name for f in dataclasses.fields(o))
    return {n: getattr(o, n) for n in names}


def document(value: Any) -> Any:
    """The object an output value is written as (``to_dict``: a window result's fields, a dict as
    it is, anything else as ``{"value": ...}``), a dataclass left for the encoder to read."""
    if type(value) is dict:
        return value
    return value if dataclasses.is_dataclass(value) and not isinstance(value, type) else to_dict(value)


def to_dict(row: Any) -> dict[str, Any]:
    """A result row as a mapping: a dataclass's fields, a dict itself, a Spark ``Row``'s
    fields, anything else as ``{"value": row}``."""
    if dataclasses.is_dataclass(row) and not isinstance(row, type):
        return dataclasses.asdict(row)
    if isinstance(row, dict):
        return row
    if hasattr(row, "asDict"):
        return dict(row.asDict(recursive=True))
    return {"value": row}


def late_document(value: Any, partition: int | None, offset: int | None, windows: tuple[Any, ...],
                  source: str | None = None) -> dict[str, Any]:
    """A late element as the late output's row: its fields (:func:`document`), and in one field
    (:data:`_LATE`) where it came from and the windows that rejected it, which the frame names and
    types as the native path's late output has them (:func:`_late_columns`). ``source``: the
    source's name, where several sources reach the operator (a partition and offset alone would
    not say whose)."""
    windows_ = [{"start": getattr(w, "start", None), "end": getattr(w, "end", None)} for w in windows]
    late: dict[str, Any] = {"partition": partition, "offset": offset, "rejected_windows": windows_}
    if source is not None:
        late["source"] = source
    return {**to_dict(value), _LATE: late}


def late_row(document: dict[str, Any]) -> dict[str, Any]:
    """A :func:`late_document` as one flat row of the late output's columns, for a sink that writes
    rows itself (a :class:`~lowwater.spark.sinks.DirectorySink` on the reference runtime): the
    element's fields, then its ``source`` (with several sources), ``partition``, ``offset`` and
    ``rejected_windows``, named by :func:`~lowwater.spark.native_sql.late_names`' rule, as the Spark
    paths' frames have them."""
    from lowwater.spark.native_sql import late_names, late_source_name

    row = {k: v for k, v in document.items() if k != _LATE}
    late = document[_LATE]
    part, off, rejected = late_names(row)
    if "source" in late:
        row[late_source_name(list(row))] = late["source"]
    row[part], row[off], row[rejected] = late["partition"], late["offset"], late["rejected_windows"]
    return row


_LATE = "_lw_late"
"""The field of a late document that holds its position and rejected windows: the frame names
them after the element's other fields (:func:`~lowwater.spark.native_sql.late_names`)."""


_ENCODER = json.JSONEncoder(default=_json_default, allow_nan=True)
"""What ``json.dumps(doc, default=_json_default, allow_nan=True)`` makes anew at each call."""


def to_json(value: Any) -> str:
    """An output value as a JSON object, the row a DataFrame sink gets (:func:`document`); what
    JSON cannot say becomes text. A dataclass is read field by field as the encoder meets it: what
    ``dataclasses.asdict`` gives, without its deep copy."""
    return _ENCODER.encode(document(value))


def json_row(value: Any, shapes: set[str], order: dict[str, None] | None = None) -> str:
    """:func:`to_json` of ``value``, its :func:`shape` added to ``shapes`` while they are at most
    :data:`MAX_SHAPES` (one more marks the bucket as having too many: :func:`reported`). A value
    of a shape new to ``shapes`` adds its top-level field names to ``order`` (the order in which
    the bucket's values first named them: the columns' order, :meth:`JsonFrames.settled`)."""
    doc = document(value)
    if len(shapes) <= MAX_SHAPES:
        seen = len(shapes)
        shapes.add(shape(doc))
        if order is not None and len(shapes) != seen:
            order.update(dict.fromkeys(field_names(doc)))
    return _ENCODER.encode(doc)


def field_names(doc: Any) -> list[str]:
    """The names of a document's top-level fields as its JSON text writes them, in its order: a
    dict's keys (``1`` as ``"1"``), a dataclass's fields."""
    if isinstance(doc, dict):
        return [k if type(k) is str else json.loads(_quoted(k)) for k in doc]
    if dataclasses.is_dataclass(doc) and not isinstance(doc, type):
        return [f.name for f in dataclasses.fields(doc)]
    return []


def merge_orders(reports: list[list[str] | None]) -> list[str]:
    """The buckets' field orders of one output kind, in the order given: each name where it first appears."""
    merged: dict[str, None] = {}
    for r in reports:
        merged.update(dict.fromkeys(r or ()))
    return list(merged)


def reported(shapes: set[str]) -> list[str] | None:
    """A bucket's shapes of one output as its statistics carry them: None if there were too many."""
    return sorted(shapes) if len(shapes) <= MAX_SHAPES else None


_QUOTED: dict[Any, str] = {}
_DATACLASS_FIELDS: dict[type, list[tuple[str, str]]] = {}


def _quoted(key: Any) -> str:
    """A dict key as ``json.dumps`` names the field (a string, a number, a boolean or None; it
    refuses others), quoted: each name's shape part is ``"name":shape``."""
    q = _QUOTED.get(key) if type(key) is str else None
    if q is None:
        q = json.dumps(key if isinstance(key, str) else json.dumps(key))
        if type(key) is str and len(_QUOTED) < 4096:
            _QUOTED[key] = q
    return q


def _dataclass_fields(t: type) -> list[tuple[str, str]]:
    """A dataclass's fields as the encoder's default writes them: (quoted name, attribute), in the
    order :func:`shape` writes an object's fields (by quoted name: two quoted names differ before
    the ``:`` that follows them)."""
    fields = _DATACLASS_FIELDS.get(t)
    if fields is None:
        fields = _DATACLASS_FIELDS[t] = sorted((_quoted(f.name), f.name) for f in dataclasses.fields(t))
    return fields


def shape(o: Any) -> str:
    """What Spark's JSON schema inference reads of the text ``json.dumps(o, default=...)`` writes
    (:func:`to_json`), as a canonical string, in the encoder's own order of tests:

    * ``s`` a string, and ``e`` the empty one (Spark reads it as it reads a null, not as a string);
    * ``n`` null, ``b`` a boolean;
    * ``i`` an integer that is a ``long`` (BIGINT), ``I<d>`` one of ``d`` digits beyond it (a
      DECIMAL of ``d`` digits, or a DOUBLE past 38);
    * ``f`` a float, NaN and the infinities too (DOUBLE);
    * ``d<s>`` a finite ``Decimal`` with ``s`` places after the point (written as its text, which
      Spark infers as a string: :meth:`JsonFrames.settled` makes the field a ``DECIMAL(38, s)``
      where every value it has is one, or an integer); a NaN or infinite one is text, ``s``;
    * ``a[...]`` an array and the set of its elements' shapes;
    * ``o{...}`` an object and its named fields' shapes, in order of name;
    * anything else as the encoder's ``default`` makes it.

    Per output row on the executors, so the common kinds are tested first by exact type."""
    t = type(o)
    if t is str:
        return "s" if o else "e"  # Spark infers an empty string as it does a null
    if t is int:
        return "i" if -_LONG <= o < _LONG else f"I{len(str(abs(o)))}"
    if t is float:
        return "f"
    if o is None:
        return "n"
    if t is Decimal:
        return _decimal_shape(o)
    fields = _DATACLASS_FIELDS.get(t)
    if fields is None and dataclasses.is_dataclass(t) and not isinstance(o, (str, int, float, list, tuple, dict)):
        fields = _dataclass_fields(t)
    if fields is not None:
        return "o{" + ",".join([q + ":" + shape(getattr(o, a)) for q, a in fields]) + "}"
    return _shape(o)


def _shape(o: Any) -> str:
    """:func:`shape` of the rest, in the encoder's order of ``isinstance`` tests."""
    if isinstance(o, str):
        return "s" if o else "e"
    if o is None:
        return "n"
    if o is True or o is False:
        return "b"
    if isinstance(o, int):
        return "i" if -_LONG <= o < _LONG else f"I{len(str(abs(int(o))))}"
    if isinstance(o, float):
        return "f"
    if isinstance(o, Decimal):
        return _decimal_shape(o)
    if isinstance(o, (list, tuple)):
        return "a[" + ",".join(sorted({shape(x) for x in o})) + "]"
    if isinstance(o, dict):
        return "o{" + ",".join(sorted([_quoted(k) + ":" + shape(v) for k, v in o.items()])) + "}"
    return shape(_json_default(o))


def _decimal_shape(d: Decimal) -> str:
    """A Decimal's shape: ``d<places>``, or text (``s``) when it is not finite."""
    exponent = d.as_tuple().exponent
    return f"d{max(0, -exponent)}" if isinstance(exponent, int) else "s"


def merge_shapes(reports: list[list[str] | None]) -> frozenset[str] | None:
    """The batch's shapes of one output kind from its buckets' reports; None if one bucket had too many."""
    merged: set[str] = set()
    for r in reports:
        if r is None:
            return None
        merged.update(r)
    return frozenset(merged)


class JsonFrames:
    """JSON rows as DataFrames, with the schemas Spark inferred kept per set of shapes (a run's,
    in the driver's memory: O(distinct sets), at most :attr:`limit`)."""

    limit = 64

    def __init__(self) -> None:
        self.schemas: dict[frozenset[str], StructType] = {}
        self.inferred = 0
        """How many times Spark inferred a schema (a job each)."""

    def schema(self, rows: DataFrame, column: str, shapes: frozenset[str] | None) -> StructType:
        """The schema Spark infers from the JSON strings of ``rows``' ``column``: a job over every
        row the first time a set of shapes comes, kept for that set after."""
        schema = None if shapes is None else self.schemas.get(shapes)
        if schema is None:
            schema = _infer(rows.select(column)).schema
            self.inferred += 1
            if shapes is not None and len(self.schemas) < self.limit:
                self.schemas[shapes] = schema
        return schema

    def settled(self, rows: DataFrame, column: str, shapes: frozenset[str] | None, kept: StructType | None,
                what: str, batch_id: int, late: bool = False, late_source: bool = False,
                order: list[str] | None = None, seed: StructType | None = None) -> tuple[DataFrame, StructType]:
        """The JSON strings of ``rows``' ``column`` as a DataFrame whose columns keep their types from
        batch to batch, as a streaming DataFrame's do: with ``kept``, the schema of the output's
        batches so far (None before its first rows), the batch's own (:meth:`schema`) may add
        columns and may not change a column's type. Returns the frame and the schema kept from now on.

        * A field that is null, absent or a list of nothing but nulls in every row of the batch
          says nothing of its type: it is left out of the batch's schema (:func:`_null_fields`),
          so it is a column once a batch gives it a value (Spark's inference would make it a
          STRING, which a later batch's number would contradict).
        * A column of ``kept`` the batch does not have is null in its rows; a field ``kept`` does
          not have becomes a column after the others.
        * A field whose every value is a ``Decimal`` (or an integer, or null) is a ``DECIMAL(38, s)``
          column, ``s`` the most places a value of the batch has (:func:`_decimal_fields`), as the
          native path's sum of a ``DECIMAL`` column is (Spark's inference would read the text it is
          written as: a string). A later batch's values may have fewer places, not more.
        * A number in a DOUBLE column, an integer or a decimal of no more places in a DECIMAL one,
          and any value in a STRING column (as its JSON text) fit; any other change of type raises
          :class:`~lowwater.core.errors.OutputSchemaError`, which names the field: a file, table or
          database written batch by batch cannot hold both types in one column.
        * ``seed`` (:func:`element_seed`): columns known before any row types them, each added to
          ``kept`` where it has no column of the name yet. A batch's value fits a seeded column of a
          narrower integer, a FLOAT, a TIMESTAMP or a DATE that its JSON text parses as.

        Rows are parsed with ``FAILFAST``: a value that would not fit its column fails the batch,
        it is never read as a null."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import DecimalType, StructField, StructType

        got = _without(self.schema(rows, column, shapes), _null_fields(shapes))
        got = _with_decimals(got, _decimal_fields(shapes))
        if order:  # the values' own order of fields, not the inference's order of name
            rank = {name: i for i, name in enumerate(order)}
            got = StructType(sorted(got.fields, key=lambda f: (rank.get(f.name, len(rank)), f.name)))
        if late:  # the position and windows have one type, whatever a batch's values (nulls, no windows)
            got = StructType([f for f in got.fields if f.name != _LATE] + [StructField(_LATE, _late_type(late_source))])
        if _windowed({f.name: f.dataType.simpleString() for f in got.fields}) and (
                kept is None or "fire_index" not in kept.fieldNames()):
            got = _with_int_fire_index(got)
        if seed is not None:
            kept = seed if kept is None else StructType(
                kept.fields + [f for f in seed.fields if f.name not in kept.fieldNames()])
        try:
            schema = _settle(kept, got, "")
        except _Conflict as e:
            places = isinstance(e.kept, DecimalType) and isinstance(e.got, DecimalType)
            raise OutputSchemaError(what, batch_id, e.path, e.kept.simpleString().upper(), e.got.simpleString().upper(),
                                    **({"fix": OutputSchemaError.PLACES} if places else {})) from None
        assert isinstance(schema, StructType)
        types = {f.name: f.dataType.simpleString() for f in schema.fields}
        parsed = rows.select(F.from_json(column, schema, {"mode": "FAILFAST"}).alias("_lw_r"))
        if late:
            late_type = schema[_LATE].dataType
            sourced = isinstance(late_type, StructType) and "source" in late_type.fieldNames()
            return _late_columns(parsed, lambda name: F.col(f"_lw_r.{name}"), types, sourced), schema
        if _windowed(types) and "window" not in types:
            return parsed.select("_lw_r.*", _window(lambda name: F.col(f"_lw_r.{name}")).alias("window")), schema
        df = parsed.select("_lw_r.*")
        return (df.withColumn("window", _window(F.col)) if _windowed(types) else df), schema


def settled_rows(spark: SparkSession, values: list[Any], frames: JsonFrames, kept: StructType | None, what: str,
                 batch_id: int, late: bool = False, late_source: bool = False,
                 seed: StructType | None = None) -> tuple[DataFrame | None, StructType | None]:
    """Values on the driver (the general path's outputs; a reference runtime's batch to a DataFrame
    sink) as a DataFrame typed as the keyed path types its outputs (:meth:`JsonFrames.settled`:
    columns keep their types from ``kept`` on, a field null in every row is no column yet, decimals
    are DECIMAL; ``seed`` columns known before), with the schema to keep; ``(None, None)`` for no
    values before any schema is kept. With ``late``, each value is a :func:`late_document`. Spark's
    own inference of the values (``createDataFrame(rows)``) failed the batch on a field null in every
    row (``CANNOT_DETERMINE_TYPE``) and typed each batch apart."""
    from lowwater.spark.outputs import empty_frame

    shapes: set[str] = set()
    order: dict[str, None] = {}
    texts = [(json_row(v, shapes, order),) for v in values]
    if not texts and kept is None:
        return None, None
    rows = spark.createDataFrame(texts, "json STRING") if texts else empty_frame(spark, "json STRING")
    return frames.settled(rows, "json", merge_shapes([reported(shapes)]), kept, what, batch_id, late=late,
                          late_source=late_source, order=list(order), seed=seed)


def element_seed(schema: StructType, fields: list[str], timestamps: bool = True) -> StructType | None:
    """The late output's columns for an element's ``fields`` as ``schema`` (the batch's DataFrame, the
    source's columns) types them, for a window fed straight from its sources (nothing but watermark
    strategies and unions between): the native path's late columns, an INT an INT, a ``DECIMAL(10,2)`` a
    ``DECIMAL(10,2)``, a TIMESTAMP a TIMESTAMP (but a ``DataFrameSource`` hands its TIMESTAMP, DATE and
    TIMESTAMP_NTZ columns over as epoch milliseconds, so its late rows have them as BIGINTs, without
    their microseconds: a known limitation a probe noted, session 56). Without it a field null in every
    late row of a batch was no column until a batch gave it a value, so the batch directories of a
    Parquet sink had different columns, and a reader without ``mergeSchema`` could miss one (a BINARY is
    written as base64 text, which ``from_json`` reads back; a MAP as an object, which JSON cannot tell
    from a STRUCT). Maps with keys other than strings are left to the batches' values, as are the
    TIMESTAMPs without ``timestamps`` (the general path's values are the driver's local time, which
    their text does not say). ``None`` when no field is left."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        BooleanType,
        DateType,
        DecimalType,
        FractionalType,
        IntegralType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    simple = (IntegralType, FractionalType, DecimalType, StringType, BooleanType, BinaryType, DateType,
              TimestampNTZType, *((TimestampType,) if timestamps else ()))

    def seedable(t: Any) -> bool:  # JSON says it, and from_json reads it back
        if isinstance(t, ArrayType):
            return seedable(t.elementType)
        if isinstance(t, MapType):
            return isinstance(t.keyType, StringType) and seedable(t.valueType)
        if isinstance(t, StructType):
            return bool(t.fields) and all(seedable(f.dataType) for f in t.fields)
        return isinstance(t, simple)

    names = set(schema.fieldNames())
    seeded = [StructField(f, schema[f].dataType) for f in dict.fromkeys(fields)
              if f in names and seedable(schema[f].dataType)]
    return StructType(seeded) if seeded else None


def _late_type(source: bool = False) -> StructType:
    """The type of a late document's :data:`_LATE` field, as Spark infers it from one with windows
    (fields in order of name); with the source's name where several sources reach the operator."""
    from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

    window = StructType([StructField("end", LongType()), StructField("start", LongType())])
    return StructType([StructField("offset", LongType()), StructField("partition", LongType()),
                       StructField("rejected_windows", ArrayType(window))]
                      + ([StructField("source", StringType())] if source else []))


class _Conflict(Exception):
    def __init__(self, path: str, kept: Any, got: Any) -> None:
        super().__init__(path)
        self.path, self.kept, self.got = path, kept, got


def _settle(kept: Any, got: Any, path: str) -> Any:
    """The type a column keeps when it held ``kept`` (None: new) and a batch gives it ``got``
    (:meth:`JsonFrames.settled`); raises :class:`_Conflict` where they differ."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        ByteType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        MapType,
        ShortType,
        StringType,
        StructField,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    if kept is None:
        return got
    if isinstance(kept, StructType) and isinstance(got, StructType):
        new = {f.name: f for f in got.fields}
        fields = []
        for f in kept.fields:
            g = new.pop(f.name, None)
            fields.append(f if g is None else StructField(f.name, _settle(f.dataType, g.dataType,
                                                                          f"{path}.{f.name}" if path else f.name)))
        return StructType(fields + [f for f in got.fields if f.name in new])
    if isinstance(kept, ArrayType) and isinstance(got, ArrayType):
        return ArrayType(_settle(kept.elementType, got.elementType, f"{path}[]"))
    if isinstance(kept, MapType) and isinstance(got, (StructType, MapType)):  # a seeded MAP: its values one type
        for name, value in ([(f.name, f.dataType) for f in got.fields] if isinstance(got, StructType)
                            else [("*", got.valueType)]):
            _settle(kept.valueType, value, f"{path}.{name}" if path else name)
        return kept
    if kept == got or isinstance(kept, StringType) or (
            isinstance(kept, DoubleType) and isinstance(got, (LongType, DecimalType))):
        return kept
    if isinstance(kept, DecimalType) and (isinstance(got, LongType) or (
            isinstance(got, DecimalType) and got.scale <= kept.scale)):
        return kept  # an integer or fewer places: exact (more integer digits than kept fail the parse)
    if (isinstance(kept, (IntegerType, ShortType, ByteType)) and isinstance(got, LongType)) or (
            isinstance(kept, FloatType) and isinstance(got, (DoubleType, LongType))) or (
            isinstance(kept, (TimestampType, TimestampNTZType, DateType, BinaryType)) and isinstance(got, StringType)):
        return kept  # a seeded column (element_seed): its values are its type's, written as JSON
    raise _Conflict(path, kept, got)


def _parse_shape(text: str, i: int = 0) -> tuple[Any, int]:
    """A :func:`shape` read back: ``("o", {name: shape})``, ``("a", [shapes])`` or a scalar's letters;
    and where it ends."""
    c = text[i]
    if c == "o" or c == "a":
        close = "}" if c == "o" else "]"
        i += 2
        fields: dict[str, Any] = {}
        items: list[Any] = []
        while text[i] != close:
            if c == "o":
                name, i = _DECODER.raw_decode(text, i)
                value, i = _parse_shape(text, i + 1)  # past the ":"
                fields[name] = value
            else:
                value, i = _parse_shape(text, i)
                items.append(value)
            if text[i] == ",":
                i += 1
        return ((c, fields) if c == "o" else (c, items)), i + 1
    j = i + 1
    while j < len(text) and text[j].isdigit():
        j += 1
    return text[i:j], j


_DECODER = json.JSONDecoder()


def _null_fields(shapes: frozenset[str] | None) -> dict[str, Any]:
    """The documents' fields that are null, absent, or a list with nothing but nulls in each of
    ``shapes`` (``True``), and of the fields that are objects wherever they are not null, theirs
    (a dict): what a batch says nothing of the type of. None known (``{}``) without the shapes."""
    if not shapes:
        return {}
    return _nulls([parsed[1] for parsed in (_parse_shape(s)[0] for s in shapes) if parsed[0] == "o"])


def _nulls(objects: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in {n for o in objects for n in o}:
        values = [o[name] for o in objects if name in o and o[name] != "n"]
        if all(isinstance(v, tuple) and v[0] == "a" and all(x == "n" for x in v[1]) for v in values):
            out[name] = True  # only nulls and lists of nulls or of nothing: no type
        elif all(isinstance(v, tuple) and v[0] == "o" for v in values):
            inner = _nulls([v[1] for v in values])
            if inner:
                out[name] = inner
    return out


def _without(schema: StructType, nulls: dict[str, Any]) -> StructType:
    """``schema`` without the fields ``nulls`` marks (:func:`_null_fields`), nor a struct left empty."""
    from pyspark.sql.types import StructField, StructType

    fields = []
    for f in schema.fields:
        mark = nulls.get(f.name)
        if mark is True:
            continue
        if isinstance(mark, dict) and isinstance(f.dataType, StructType):
            inner = _without(f.dataType, mark)
            if not inner.fields:
                continue
            f = StructField(f.name, inner, f.nullable)
        fields.append(f)
    return StructType(fields)


def _decimal_fields(shapes: frozenset[str] | None) -> Any:
    """Where ``shapes`` hold Decimals: a field whose every non-null value is a Decimal or an integer,
    at least one a Decimal, with the most places any has, as ``("d", places)``; objects and arrays
    as ``("o", {name: ...})`` and ``("a", ...)``. None where there are none (or the shapes are not
    known: Spark's inference then reads the text, a STRING, as before)."""
    if not shapes:
        return None
    return _decimals([_parse_shape(s)[0] for s in shapes])


def _decimals(values: list[Any]) -> Any:
    values = [v for v in values if v != "n"]
    if not values:
        return None
    if all(isinstance(v, str) for v in values):
        places = [int(v[1:]) for v in values if v.startswith("d")]
        if places and max(places) <= 38 and all(v.startswith("d") or v == "i" for v in values):
            return ("d", max(places))
        return None
    kinds = {v[0] if isinstance(v, tuple) else "" for v in values}
    if kinds == {"o"}:
        names = {n for v in values for n in v[1]}
        inner = {n: d for n in names if (d := _decimals([v[1][n] for v in values if n in v[1]])) is not None}
        return ("o", inner) if inner else None
    if kinds == {"a"}:
        element = _decimals([x for v in values for x in v[1]])
        return ("a", element) if element is not None else None
    return None


def _with_decimals(schema: Any, spec: Any) -> Any:
    """``schema`` (inferred) with the DECIMAL types ``spec`` (:func:`_decimal_fields`) gives its fields."""
    from pyspark.sql.types import ArrayType, DecimalType, StructField, StructType

    if spec is None:
        return schema
    if spec[0] == "d":
        return DecimalType(38, spec[1])
    if spec[0] == "o" and isinstance(schema, StructType):
        return StructType([StructField(f.name, _with_decimals(f.dataType, spec[1].get(f.name)), f.nullable)
                           for f in schema.fields])
    if spec[0] == "a" and isinstance(schema, ArrayType):
        return ArrayType(_with_decimals(schema.elementType, spec[1]), schema.containsNull)
    return schema


def _late_columns(df: DataFrame, col: Any, types: dict[str, str], sourced: bool = False) -> DataFrame:
    """The late output's columns in one projection of ``df`` (``col(name)`` each column of
    ``types``, in their order): the element's fields, then (``sourced``: several sources reach the
    operator) its source's name, its partition (INT), offset (BIGINT) and the windows that
    rejected it (``array<struct<start: BIGINT, end: BIGINT>>``: the inference puts a struct's
    fields in order of name), as the native path gives them."""
    from pyspark.sql import functions as F

    from lowwater.spark.native_sql import late_names, late_source_name

    fields = [n for n in types if n != _LATE]
    part, off, rejected = late_names(fields)
    late = col(_LATE)  # its type is _late_type(), whatever the rows (JsonFrames.settled)
    windows = F.transform(late["rejected_windows"],
                          lambda w: F.struct(w["start"].alias("start"), w["end"].alias("end")))
    source = [late["source"].alias(late_source_name(fields))] if sourced else []
    return df.select(*[col(n).alias(n) for n in fields], *source, late["partition"].cast("int").alias(part),
                     late["offset"].cast("bigint").alias(off), windows.alias(rejected))


def _with_int_fire_index(schema: StructType) -> StructType:
    """``schema`` with a window result's ``fire_index`` an INT, as the native path's (``result_ddl``):
    inferred from JSON it is a BIGINT, and a table the native path made would refuse it. Later
    batches' BIGINTs settle into it (:func:`_settle`); a checkpoint that kept a BIGINT keeps it."""
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    return StructType([StructField(f.name, IntegerType(), f.nullable)
                       if f.name == "fire_index" and isinstance(f.dataType, LongType) else f for f in schema.fields])


def _windowed(types: dict[str, str]) -> bool:
    """Whether the rows are window results, which get a ``window`` struct."""
    return types.get("window_start") == "bigint" and types.get("window_end") == "bigint"


def _window(col: Any) -> Any:
    """Spark's ``window`` struct of the columns ``col("window_start")`` and ``col("window_end")``; a
    bound no TIMESTAMP holds (a global window's, the 64-bit ends) is null
    (:func:`~lowwater.spark.native_sql.window_sql`)."""
    from pyspark.sql import functions as F

    from lowwater.spark.native_sql import TIMESTAMP_MILLIS

    def bound(c: Any) -> Any:
        return F.when(c.between(-TIMESTAMP_MILLIS, TIMESTAMP_MILLIS), F.timestamp_millis(c))

    return F.struct(bound(col("window_start")).alias("start"), bound(col("window_end")).alias("end"))


def _infer(frame: DataFrame) -> DataFrame:
    """Spark's ``read.json`` of a DataFrame of JSON strings (the schema inferred on the executors)."""
    spark = frame.sparkSession
    try:  # the JVM's read.json(Dataset[String]): the strings never pass through Python
        from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

        jvm: Any = spark._jvm
        strings = getattr(frame._jdf, "as")(jvm.org.apache.spark.sql.Encoders.STRING())
        return ClassicDataFrame(spark._jsparkSession.read().json(strings), spark)
    except (ImportError, AttributeError):  # Spark Connect: through the executors' Python workers
        return spark.read.json(frame.rdd.map(lambda r: r[0]))
