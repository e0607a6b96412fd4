"""A Kafka value read in one pass on the JVM: the fast path of :class:`KafkaShapedSource`.

``jvm/lowwater/src/dev/lowwater/KafkaValueReader.java``, built by ``./dev`` into
``jars/spark/lowwater-jvm.jar`` (``scripts/build_jar.sh``, with ``javac`` against pyspark's
own jars) and handed to Spark with the other jars of ``spark.jars``, parses a value once with
Jackson: it decides whether the record is an element, as the source's Spark SQL checks decide
it, and reads its declared fields. Those checks parse every value twice (``from_json`` and a
VARIANT parse) and cost about three times Spark's own ``from_json``; the reader costs less than
``from_json`` alone (docs/performance.md, session 50). A bad record's reason is still worded by the SQL
checks, which then run on that record only.

Where the class is not on Spark's class path (a session started without the jar), the source
runs its SQL checks on every record, with the same results, and says so once in the log.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

__all__ = ["JAR_NAME", "JVM_CLASS", "jvm_reader"]

JVM_CLASS = "dev.lowwater.KafkaValueReader"
JAR_NAME = "lowwater-jvm.jar"
"""The jar in ``jars/spark`` that holds :data:`JVM_CLASS`."""

log = logging.getLogger("lowwater.spark")
_warned: set[int] = set()


def _column_type(declared: str) -> str:
    """The Spark SQL type the reader gives a field of type ``declared`` (canonical)."""
    return "BIGINT" if declared in ("TIMESTAMP", "DATE") else declared


def jvm_reader(spark: SparkSession, declared: Sequence[tuple[str, str]]) -> Callable[[Column], Column] | None:
    """A function of a value column (BINARY) giving the struct ``(bad, v0, v1, ...)``: ``bad``
    null for an element, whose fields ``v<i>`` are ``declared[i]`` read (TIMESTAMP and DATE as
    epoch milliseconds); None where :data:`JVM_CLASS` is not on the session's class path."""
    from pyspark.sql import functions as F

    from lowwater.io.fields import DATE_TEXT, TIMESTAMP_TEXT

    returns = ", ".join(["bad STRING", *(f"v{i} {_column_type(t)}" for i, (_, t) in enumerate(declared))])
    name = "lowwater_kafka_value_" + hashlib.sha1(returns.encode()).hexdigest()[:12]
    try:
        spark.udf.registerJavaFunction(name, JVM_CLASS, _struct(returns))
    except Exception as exc:  # the class is not on the class path (or Spark Connect: no JVM functions)
        if id(spark) not in _warned:
            _warned.add(id(spark))
            log.warning("lowwater's JVM reader (%s, in jars/spark/%s) is not on Spark's class path (%s): "
                        "KafkaShapedSource checks every value in Spark SQL, about 3x slower. Add the jar "
                        "(spark.jars, or --jars) to read at full speed", JVM_CLASS, JAR_NAME,
                        str(exc).splitlines()[0][:200])
        return None
    spec = json.dumps([TIMESTAMP_TEXT, DATE_TEXT, *([n, t] for n, t in declared)])
    return lambda value: F.call_function(name, value, F.lit(spec))


def _struct(fields: str) -> Any:
    """``a T, b U`` (DDL) as the StructType ``registerJavaFunction`` takes."""
    from pyspark.sql.types import StructType

    return StructType.fromDDL(fields)
