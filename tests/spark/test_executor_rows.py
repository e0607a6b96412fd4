"""The executor path's control row: one Arrow row of the rows' own schema, only its partition and state set."""

from __future__ import annotations

import pyarrow as pa

from lowwater.spark.executor_watermarks import control_row


def _rows() -> pa.Table:
    return pa.table({
        "_partition": pa.array([3, 3], pa.int32()), "_offset": pa.array([0, 1], pa.int64()),
        "key": ["a", None], "ts": pa.array([1, 2**62 + 1], pa.int64()), "flag": [True, False],
        "at": pa.array([1, 2], pa.timestamp("us", tz="UTC")),
        "_ts": pa.array([1, None], pa.int64()), "_ctl": pa.nulls(2, pa.string()), "_why": pa.nulls(2, pa.string()),
    })


def test_the_control_row_has_the_rows_schema_and_only_its_partition_and_state() -> None:
    rows = _rows()
    out = pa.concat_tables([rows, control_row(rows.schema, 3, "state")])
    assert out.schema == rows.schema and out.num_rows == 3
    assert out.column("_partition").to_pylist() == [3, 3, 3]
    assert out.column("_ctl").to_pylist() == [None, None, "state"]
    assert out.column("ts").to_pylist() == [1, 2**62 + 1, None]  # exact: no float on the way
    assert [c for c in out.column_names if out.column(c)[2].is_valid] == ["_partition", "_ctl"]
