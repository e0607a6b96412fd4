"""The executor path's control row: appended without pandas deciding a dtype from an all-null row."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from lowwater.spark.executor_watermarks import with_control_row


def _rows() -> pd.DataFrame:
    return pd.DataFrame({
        "_partition": np.array([3, 3], dtype="int32"), "_offset": np.array([0, 1]), "_source_ts": [np.nan, np.nan],
        "key": ["a", None], "ts": np.array([1.0, 2.0]), "flag": [True, False],
        "_ts": pd.array([1, None], dtype="Int64"), "_ctl": [None, None], "_why": [None, None],
    })


def test_the_control_row_is_appended_without_a_pandas_future_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pandas' "concatenation with empty or all-NA entries" warning
        out = with_control_row(_rows(), 3, "state")
        empty = with_control_row(_rows().iloc[:0], 3, "state")
    assert list(out.columns) == list(_rows().columns)
    assert out["_offset"].tolist()[:2] == [0, 1] and out["_offset"].isna().tolist() == [False, False, True]
    assert out["_partition"].tolist() == [3, 3, 3] and out["_ctl"].tolist() == [None, None, "state"]
    assert out["flag"].tolist()[:2] == [True, False] and out["key"].tolist()[:2] == ["a", None]
    assert len(empty) == 1 and empty["_ctl"].tolist() == ["state"]
