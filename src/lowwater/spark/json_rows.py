"""The keyed path's outputs for DataFrame sinks: Python values as JSON rows, and those rows as a
DataFrame, its schema inferred by Spark only when the batch's rows have shapes not seen before.

Stage B (:mod:`lowwater.spark.keyed`) writes each output value a DataFrame sink takes as one
JSON object (:func:`to_json`) and reports, per output kind, the set of the objects' *shapes*
(:func:`shape`). Spark's JSON schema inference reads each document's structure and the kinds of
its values (a ``long``, an integer of ``d`` digits beyond it, a floating-point number, a string,
a boolean, a null, an array, an object and its field names) and merges what it finds over the
rows with a merge that is commutative, associative and idempotent: the schema it infers is a
function of the *set* of the rows' shapes. So :class:`JsonFrames` runs Spark's inference (a
job over every row) the first time a set of shapes comes, and parses the rows of a later batch
with the same set with ``from_json`` and the schema kept: the same DataFrame, one job fewer for
each output a DataFrame sink takes. A bucket that meets more distinct shapes than
:data:`MAX_SHAPES` reports none, and its batch infers as before.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = ["MAX_SHAPES", "JsonFrames", "document", "merge_shapes", "shape", "to_json"]

MAX_SHAPES = 32
"""Distinct shapes of one output kind a bucket reports at most; beyond it, none (infer)."""

_LONG = 1 << 63


def _json_default(o: Any) -> Any:
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}
    return str(o)


def document(value: Any) -> Any:
    """The object an output value is written as (``to_dict``: a window result's fields, a dict as
    it is, anything else as ``{"value": ...}``), a dataclass left for the encoder to read."""
    from lowwater.spark.sinks.files import to_dict

    return value if dataclasses.is_dataclass(value) and not isinstance(value, type) else to_dict(value)


def to_json(value: Any) -> str:
    """An output value as a JSON object, the row a DataFrame sink gets (:func:`document`); what
    JSON cannot say becomes text. A dataclass is read field by field as the encoder meets it: what
    ``dataclasses.asdict`` gives, without its deep copy."""
    return json.dumps(document(value), default=_json_default, allow_nan=True)


def _name(key: Any) -> str:
    """A dict key as ``json.dumps`` names the field (a string, a number, a boolean or None; it refuses others)."""
    return key if isinstance(key, str) else json.dumps(key)


def shape(o: Any) -> str:
    """What Spark's JSON schema inference reads of the text ``json.dumps(o, default=...)`` writes
    (:func:`to_json`), as a canonical string, in the encoder's own order of tests:

    * ``s`` a string, and ``e`` the empty one (Spark reads it as it reads a null, not as a string);
    * ``n`` null, ``b`` a boolean;
    * ``i`` an integer that is a ``long`` (BIGINT), ``I<d>`` one of ``d`` digits beyond it (a
      DECIMAL of ``d`` digits, or a DOUBLE past 38);
    * ``f`` a float, NaN and the infinities too (DOUBLE);
    * ``a[...]`` an array and the set of its elements' shapes;
    * ``o{...}`` an object and its named fields' shapes, in order of name;
    * anything else as the encoder's ``default`` makes it."""
    if isinstance(o, str):
        return "s" if o else "e"  # Spark infers an empty string as it does a null
    if o is None:
        return "n"
    if o is True or o is False:
        return "b"
    if isinstance(o, int):
        return "i" if -_LONG <= o < _LONG else f"I{len(str(abs(int(o))))}"
    if isinstance(o, float):
        return "f"
    if isinstance(o, (list, tuple)):
        return "a[" + ",".join(sorted({shape(x) for x in o})) + "]"
    if isinstance(o, dict):
        return "o{" + ",".join(sorted(json.dumps(_name(k)) + ":" + shape(v) for k, v in o.items())) + "}"
    return shape(_json_default(o))


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

    def frame(self, rows: DataFrame, shapes: frozenset[str] | None) -> DataFrame:
        """``rows`` (one JSON string column) as the DataFrame they describe, with Spark's ``window``
        struct beside a window result's epoch-ms fields."""
        from pyspark.sql import functions as F

        schema = None if shapes is None else self.schemas.get(shapes)
        if schema is not None:
            column = rows.columns[0]
            df = rows.select(F.from_json(column, schema).alias("_lw_r")).select("_lw_r.*")
        else:
            df = _infer(rows)
            self.inferred += 1
            if shapes is not None and len(self.schemas) < self.limit:
                self.schemas[shapes] = df.schema
        types = dict(df.dtypes)
        if types.get("window_start") == "bigint" and types.get("window_end") == "bigint":
            df = df.withColumn("window", F.struct(F.timestamp_millis("window_start").alias("start"),
                                                  F.timestamp_millis("window_end").alias("end")))
        return df


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
