"""The native path's SQL text: one entry per built-in aggregate, pure strings (no Spark session)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from lowwater.core.errors import PipelineError
from lowwater.core.windows import BUILTIN_AGGREGATES
from lowwater.spark import native_sql as sql
from lowwater.spark.native_sql import AGGREGATE_SQL, sql_of


def test_every_builtin_aggregate_has_sql_on_the_native_path() -> None:
    assert set(AGGREGATE_SQL) == set(BUILTIN_AGGREGATES.values())


def test_an_aggregate_without_sql_fails_when_the_processor_is_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(AGGREGATE_SQL, BUILTIN_AGGREGATES["avg"])
    with pytest.raises(PipelineError, match=r"add it to lowwater\.spark\.native_sql\.AGGREGATE_SQL"):
        sql_of("avg")


def test_an_integer_sum_keeps_its_high_and_low_32_bits_apart_and_wraps_them_into_a_bigint() -> None:
    agg = sql_of("sum")("int")
    assert [a.name for a in agg.accumulators] == ["acc_hi", "acc_lo"]
    assert sql.merge_exprs(agg, "b_", late=True) == ["sum(acc_hi) AS b_acc_hi", "sum(acc_lo) AS b_acc_lo",
                                                     "sum(n) AS b_n", "sum(nl) AS b_nl"]
    assert sql.merge_exprs(agg) == ["sum(acc_hi) AS acc_hi", "sum(acc_lo) AS acc_lo", "sum(n) AS n"]
    assert sql.value_expr(agg, "acc", "n") == sql.WRAP.format(hi="acc_hi", lo="acc_lo")
    assert agg.value_type == "bigint"


@pytest.mark.parametrize(
    ("kind", "value", "partial_ddl", "result"),
    [
        ("sum", "double", "key string, acc DOUBLE, n BIGINT", "CAST(acc AS double)"),
        ("sum", "decimal(10,2)", "key string, acc DECIMAL(38,2), n BIGINT", "CAST(acc AS DECIMAL(38,2))"),
        ("count", "bigint", "key string, acc BIGINT, n BIGINT", "CAST(n AS BIGINT)"),
        ("min", "int", "key string, acc int, n BIGINT", "CAST(acc AS int)"),
        ("max", "string", "key string, acc string, n BIGINT", "CAST(acc AS string)"),
        ("avg", "double", "key string, acc DOUBLE, n BIGINT", "acc / n"),
    ],
)
def test_each_aggregate_has_one_accumulator_merged_and_turned_into_its_value(
    kind: str, value: str, partial_ddl: str, result: str,
) -> None:
    agg = sql_of(kind)(value)
    schema = {"key": "string", "value": value, "fields": []}
    assert sql.partial_ddl(agg, schema) == partial_ddl
    assert sql.value_expr(agg, "acc", "n") == result
    assert sql.partial_columns(agg) == ["acc", "cnt AS n"]


def test_an_avg_of_integers_keeps_its_exact_sum_beside_the_double_sum_of_older_checkpoints() -> None:
    """Session 65: the exact sum in ``acc_x``; the DOUBLE ``acc`` of a checkpoint's partials of
    before (null in new ones) is added, so a window open across the upgrade keeps its old sum."""
    agg = sql_of("avg")("bigint")
    schema = {"key": "string", "value": "bigint", "fields": []}
    assert sql.partial_ddl(agg, schema) == "key string, acc DOUBLE, acc_x DECIMAL(38,0), n BIGINT"
    assert sql.partial_aggregates(agg, count=False) == ["CAST(NULL AS DOUBLE) AS acc",
                                                        "sum(CAST(_v AS DECIMAL(38,0))) AS acc_x"]
    assert sql.value_expr(agg, "acc", "n") == "(coalesce(CAST(acc_x AS DOUBLE), 0D) + coalesce(acc, 0D)) / n"


def test_the_late_output_renames_its_source_position_when_the_element_has_those_fields() -> None:
    schema = {"key": "string", "value": "bigint", "fields": [["offset", "bigint"], ["v`x", "int"]]}
    assert sql.late_ddl(schema) == ("`offset` bigint, `v``x` int, partition INT, source_offset BIGINT, "
                                    "rejected_windows ARRAY<STRUCT<start: BIGINT, end: BIGINT>>")
    schema["fields"].append(["rejected_windows", "string"])  # an element's own field keeps its name
    assert sql.late_ddl(schema).endswith(", `rejected_windows` string, partition INT, source_offset BIGINT, "
                                         "source_rejected_windows ARRAY<STRUCT<start: BIGINT, end: BIGINT>>")
    assert sql.late_names(["partition", "source_partition"]) == ("source_source_partition", "offset",
                                                                 "rejected_windows")


def test_a_batch_writes_its_partials_with_one_task_per_ten_thousand_within_the_shuffle_partitions() -> None:
    from lowwater.spark.window_store import ROWS_PER_WRITE_TASK, write_tasks

    assert write_tasks(None, 4) is None  # no batch before it in this run: adaptive execution decides
    assert write_tasks(0, 4) == 1
    assert write_tasks(ROWS_PER_WRITE_TASK, 4) == 1
    assert write_tasks(ROWS_PER_WRITE_TASK + 1, 4) == 2
    assert write_tasks(10**9, 4) == 4
    assert write_tasks(10**9, 200) == 200
