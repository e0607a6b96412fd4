"""Timestamps and watermarks computed in Python on the executors, per partition.

For strategies that are not simple aggregates (user generators, punctuated checks,
classic extractors, Python timestamp assigners), the native path runs each partition's
assigner and generator where its rows are: one ``applyInPandas`` grouped by
``_partition``, rows in offset (arrival) order. Each partition's state after the batch
travels back as a *control row* (``_ctl``: the pickled assigner, generator and the
watermark events it emitted), which the batch's one aggregation collects with the
partition counts. The driver keeps the state between batches and runs the periodic
emission of partitions that had no rows.

The batch's clock goes with the state, so an executor's idleness and time-lag decisions
are the driver's, and a replay makes the same ones.
"""

from __future__ import annotations

import base64
import pickle
from typing import TYPE_CHECKING, Any

from lowwater.core.clock import ManualClock
from lowwater.core.errors import BadRecordError, LowwaterError, UserFunctionError
from lowwater.core.time import MIN_TIMESTAMP
from lowwater.core.watermarks import (
    PartitionWatermarking,
    RecordingOutput,
    WatermarkGeneratorContext,
    WatermarkStrategy,
)
from lowwater.core.watermarks.assigner import assigned_timestamp, timestamp_or_none
from lowwater.spark.sealed import loads

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["PartitionState", "decode", "exact_numbers", "with_executor_timestamps"]

PartitionState = tuple[ManualClock, PartitionWatermarking[Any]]
"""A partition's own clock (set to the batch's time) with its assigner and generator."""


def new_partition(strategy: WatermarkStrategy[Any], partition: int) -> PartitionState:
    clock = ManualClock(0)
    return clock, strategy.create_partition(WatermarkGeneratorContext(partition=partition, clock=clock))


def decode(ctl: str) -> tuple[PartitionState, RecordingOutput]:
    """A control row's partition state and the watermark events its generator emitted (read on the
    driver: :func:`~lowwater.spark.sealed.loads` leaves the driver's own classes as they are)."""
    state, rows = loads(base64.b64decode(ctl))
    return state, RecordingOutput.from_rows(rows)


def with_executor_timestamps(
    df: DataFrame, fields: list[str], strategy: WatermarkStrategy[Any], states: dict[int, bytes], clock_ms: int
) -> DataFrame:
    """``df`` with ``_ts`` (assigned on the executors) and one control row per partition.

    Number columns that may hold a null (:func:`exact_numbers`) cross to pandas each with a column
    that says where the nulls were, and reach the assigner and the generator as Python numbers and
    None, as on every other path: a null in one row made pandas give an integer column as float64,
    so a timestamp past 2**53 ms was rounded (by up to 1,024 ms near 2**62) and its element went to
    another window, and a user's assigner got ``3.0`` for ``3``; and a null DOUBLE reached the
    user's code as NaN, so ``e["x"] is not None`` was true for it (a user probe, session 58)."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    # every column nullable: a control row carries only its partition and its state
    fields_ = [StructField(f.name, f.dataType, True) for f in df.schema.fields]
    schema = StructType([*fields_, StructField("_ts", LongType()), StructField("_ctl", StringType()),
                         StructField("_why", StringType())])
    columns = [f.name for f in schema.fields]
    df, numbers = exact_numbers(df)

    def per_partition(pdf: Any) -> Any:
        import pandas as pd

        for name, nulls in numbers.items():  # numbers, and None where the column had a null
            where = pdf.pop(nulls)
            if where.any():
                pdf[name] = pdf[name].astype(object).where(~where, None)
        pdf = pdf.sort_values(["_offset"], kind="stable")
        p = int(pdf["_partition"].iloc[0])
        clock, pw = pickle.loads(states[p]) if p in states else new_partition(strategy, p)
        clock.set(clock_ms)
        out = RecordingOutput()
        stamps: list[int | None] = []
        whys: list[str | None] = []
        records = pdf[fields].to_dict("records")
        sources = pdf["_source_ts"].tolist()
        offsets = pdf["_offset"].tolist()
        corrupt = pdf["_corrupt"].tolist() if "_corrupt" in pdf.columns else [None] * len(pdf)
        for element, source_ts, offset, unparsed in zip(records, sources, offsets, corrupt, strict=True):
            if unparsed is not None:  # never shown to user code; dead-lettered by the driver
                stamps.append(None)
                whys.append(None)
                continue
            prev = None if source_ts is None or source_ts != source_ts else int(source_ts)
            try:
                ts = assigned_timestamp(pw.assigner.extract_timestamp(element, MIN_TIMESTAMP if prev is None else prev),
                                        pw.assigner)
                pw.generator.on_event(element, ts, out)
            except BadRecordError as e:  # a null _ts: dead-lettered with this reason
                stamps.append(None)
                whys.append(e.reason)
                continue
            except LowwaterError:
                raise
            except Exception as e:
                raise UserFunctionError(f"timestamp/watermark assignment ({strategy!r})", e,
                                        partition=p, offset=int(offset)) from e
            stamps.append(timestamp_or_none(prev, ts))  # None: dead-lettered as a missing timestamp
            whys.append(None)
        pw.generator.on_periodic_emit(out)
        pdf = pdf.assign(_ts=pd.array(stamps, dtype="Int64"), _ctl=None, _why=whys)
        from pyspark import cloudpickle

        blob = cloudpickle.dumps(((clock, pw), out.to_rows()), protocol=5)  # type: ignore[no-untyped-call]
        return with_control_row(pdf[columns], p, base64.b64encode(blob).decode())

    return df.groupBy("_partition").applyInPandas(per_partition, schema)


_NEVER_NULL = frozenset({"_partition", "_offset"})


def exact_numbers(df: DataFrame) -> tuple[DataFrame, dict[str, str]]:
    """``df`` with each number column that may hold a null (not ``_partition``, ``_offset``) given a
    BOOLEAN column that is true where its nulls are, and those columns' names (column: its nulls'
    column). An integer column's nulls are also made 0: pandas took an integer column with a null
    as float64, rounding past 2**53; without nulls it stays int64, exact. A float column keeps its
    NaN (a DOUBLE can hold one), and pandas makes its nulls NaN too, so only the flags tell them
    apart."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ByteType, DoubleType, FloatType, IntegerType, LongType, ShortType

    integer = (LongType, IntegerType, ShortType, ByteType)
    names = [f.name for f in df.schema.fields if isinstance(f.dataType, (*integer, DoubleType, FloatType))
             and f.name not in _NEVER_NULL]
    if not names:
        return df, {}
    flags = {n: f"_null{i}_" for i, n in enumerate(names)}
    quoted = {n: F.col("`" + n.replace("`", "``") + "`") for n in names}
    zeros = {n: F.coalesce(quoted[n], F.lit(0).cast(df.schema[n].dataType)) for n in names
             if isinstance(df.schema[n].dataType, integer)}
    return df.withColumns({**{flags[n]: quoted[n].isNull() for n in names}, **zeros}), flags


def with_control_row(rows: Any, partition: int, ctl: str) -> Any:
    """``rows`` (a pandas DataFrame) and one more row: only ``_partition`` and ``_ctl`` set.

    The control row is built in the rows' own column dtypes (nullable where it needs a null),
    so the concatenation never decides a dtype from an all-null column (pandas warned about
    that with a ``FutureWarning`` per partition and batch)."""
    import pandas as pd

    control = {}
    for name, dtype in rows.dtypes.items():
        if name == "_partition":
            value: Any = [partition]
        elif name == "_ctl":
            value = [ctl]
        else:
            value = [None]
        if dtype.kind in "iu":  # numpy ints hold no null: their nullable twin
            dtype = pd.api.types.pandas_dtype(str(dtype).replace("int", "Int").replace("uInt", "UInt"))
        elif dtype.kind == "b":
            dtype = pd.BooleanDtype()
        control[name] = pd.array(value, dtype=dtype if name != "_partition" else rows.dtypes[name])
    if rows.empty:
        return pd.DataFrame(control)
    fixed = {name: rows[name].astype(control[name].dtype) for name in rows.columns
             if rows[name].dtype != control[name].dtype}
    return pd.concat([rows.assign(**fixed) if fixed else rows, pd.DataFrame(control)], ignore_index=True)


def encode_states(states: dict[int, PartitionState]) -> dict[int, bytes]:
    from pyspark import cloudpickle

    return {p: cloudpickle.dumps(s, protocol=5) for p, s in states.items()}  # type: ignore[no-untyped-call]
