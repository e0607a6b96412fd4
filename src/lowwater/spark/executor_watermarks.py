"""Timestamps and watermarks computed in Python on the executors, per partition.

For strategies that are not simple aggregates (user generators, punctuated checks,
classic extractors, Python timestamp assigners), the native path runs each partition's
assigner and generator where its rows are: one ``applyInArrow`` grouped by
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

__all__ = ["PartitionState", "decode", "with_executor_timestamps"]

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

    A partition's rows cross to Python as one Arrow table (``applyInArrow``), and each element is
    the dict Arrow's ``to_pylist`` makes of its fields, as the keyed path's stage A makes it: a
    null is None and an integer stays an exact Python int (pandas had made an integer column with
    a null float64, rounding a timestamp past 2**53 ms, and a null DOUBLE NaN: a user probe,
    session 58); a TIMESTAMP is a ``datetime``, an ARRAY a list, a STRUCT or a MAP a dict. The
    rows go back as they came, with ``_ts`` and ``_why`` beside them: no pandas on the way, which
    cost more CPU than the user's function and the generator together (session 64)."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    # every column nullable: a control row carries only its partition and its state
    fields_ = [StructField(f.name, f.dataType, True) for f in df.schema.fields]
    schema = StructType([*fields_, StructField("_ts", LongType()), StructField("_ctl", StringType()),
                         StructField("_why", StringType())])

    def per_partition(table: Any) -> Any:
        import pyarrow as pa

        table = table.sort_by("_offset")  # a stable sort: arrival order
        p = int(table.column("_partition")[0].as_py())
        clock, pw = pickle.loads(states[p]) if p in states else new_partition(strategy, p)
        clock.set(clock_ms)
        out = RecordingOutput()
        stamps: list[int | None] = []
        whys: list[str | None] = []
        n = table.num_rows
        records = table.select(fields).to_pylist(maps_as_pydicts="lossy")
        sources = table.column("_source_ts").to_pylist()
        offsets = table.column("_offset").to_pylist()
        corrupt = table.column("_corrupt").to_pylist() if "_corrupt" in table.column_names else [None] * n
        assigner, extract, on_event = pw.assigner, pw.assigner.extract_timestamp, pw.generator.on_event
        for element, source_ts, offset, unparsed in zip(records, sources, offsets, corrupt, strict=True):
            if unparsed is not None:  # never shown to user code; dead-lettered by the driver
                stamps.append(None)
                whys.append(None)
                continue
            prev = None if source_ts is None or source_ts != source_ts else int(source_ts)
            try:
                ts = assigned_timestamp(extract(element, MIN_TIMESTAMP if prev is None else prev), assigner)
                on_event(element, ts, out)
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
        from pyspark import cloudpickle

        blob = cloudpickle.dumps(((clock, pw), out.to_rows()), protocol=5)  # type: ignore[no-untyped-call]
        rows = table.append_column("_ts", pa.array(stamps, pa.int64())) \
            .append_column("_ctl", pa.nulls(n, pa.string())).append_column("_why", pa.array(whys, pa.string()))
        if any(not f.nullable for f in rows.schema):  # the control row's nulls
            rows = rows.cast(pa.schema([f.with_nullable(True) for f in rows.schema]))
        return pa.concat_tables([rows, control_row(rows.schema, p, base64.b64encode(blob).decode())])

    return df.groupBy("_partition").applyInArrow(per_partition, schema)


def control_row(schema: Any, partition: int, ctl: str) -> Any:
    """A one-row Arrow table of ``schema`` with only ``_partition`` and ``_ctl`` set."""
    import pyarrow as pa

    return pa.table([pa.array([partition], f.type) if f.name == "_partition" else
                     pa.array([ctl], f.type) if f.name == "_ctl" else pa.nulls(1, f.type) for f in schema],
                    schema=schema)


def encode_states(states: dict[int, PartitionState]) -> dict[int, bytes]:
    from pyspark import cloudpickle

    return {p: cloudpickle.dumps(s, protocol=5) for p, s in states.items()}  # type: ignore[no-untyped-call]
