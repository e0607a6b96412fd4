"""lowwater.spark.analyzed: a query over each micro-batch, analysed once and reused with each batch's data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lowwater.spark.analyzed import AnalyzedQuery

pytestmark = pytest.mark.spark


def _stream_of_files(spark: Any, tmp_path: Path, batches: list[list[tuple[str, int]]]) -> Any:
    """A streaming DataFrame that reads one Parquet file per micro-batch, ``batches`` in order."""
    src = tmp_path / "src"
    for i, rows in enumerate(batches):
        spark.createDataFrame(rows, "k STRING, v BIGINT").coalesce(1).write.parquet(str(src / f"f{i}"))
        for f in (src / f"f{i}").glob("part-*.parquet"):
            f.rename(src / f"{i:03d}.parquet")
    return spark.readStream.schema("k STRING, v BIGINT").option("maxFilesPerTrigger", 1).parquet(str(src))


def _run(spark: Any, tmp_path: Path, stream: Any, each: Any) -> None:
    q = (stream.writeStream.foreachBatch(each).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    assert q.exception() is None


BATCHES = [[("a", 1), ("b", 2), ("a", 3)], [("b", 10), ("c", 20)], [("a", 100), ("a", 200), ("c", 300)]]
SUMS = [{"a": 4, "b": 2}, {"b": 10, "c": 20}, {"a": 300, "c": 300}]


def _sums(df: Any) -> dict[str, int]:
    return {r.k: int(r.s) for r in df.collect()}


def test_a_batch_query_is_analysed_once_and_computed_over_each_batch_s_own_rows(spark: Any, tmp_path: Path) -> None:
    built: list[int] = []

    def build(batch: Any) -> Any:
        built.append(1)
        session = batch.sparkSession
        batch.createOrReplaceTempView("analyzed_test_batch")
        try:
            return session.sql("SELECT k, sum(v) AS s FROM (SELECT * FROM analyzed_test_batch WHERE v > 0) GROUP BY k")
        finally:
            session.catalog.dropTempView("analyzed_test_batch")

    query = AnalyzedQuery(build)
    got: list[dict[str, int]] = []
    _run(spark, tmp_path, _stream_of_files(spark, tmp_path, BATCHES),
         lambda df, _: got.append(_sums(query.over(df, key="bigint"))))
    assert got == SUMS
    assert (len(built), query.reused) == (1, 2), "built over the first batch, reused for the two after it"
    assert not query.broken


def test_a_new_key_or_a_batch_with_other_attributes_builds_the_query_anew(spark: Any, tmp_path: Path) -> None:
    """What the query's text depends on besides the batch (``key``) and the batch's attributes
    (here fresh expression ids every batch, as a projection made in the batch function has) are
    checked before the plan is reused: otherwise the query is built anew, with the same results."""
    built: list[int] = []

    def build(batch: Any) -> Any:
        built.append(1)
        return batch.groupBy("k").agg({"v": "sum"}).withColumnRenamed("sum(v)", "s")

    by_key, fresh = AnalyzedQuery(build), AnalyzedQuery(build)
    got: list[tuple[dict[str, int], dict[str, int]]] = []

    def each(df: Any, batch_id: int) -> None:
        got.append((_sums(by_key.over(df, key=batch_id % 2)), _sums(fresh.over(df.selectExpr("k", "v + 0 AS v")))))

    _run(spark, tmp_path, _stream_of_files(spark, tmp_path, BATCHES), each)
    assert got == [(s, s) for s in SUMS]
    assert by_key.reused == 0 and fresh.reused == 0
    assert len(built) == 6
    assert fresh.broken and fresh.template is None, "fresh ids: no plan kept, no search for the batch in it"
    assert not by_key.broken


def _observed(query: AnalyzedQuery, batch: Any) -> Any:
    from pyspark.sql import functions as F

    observed = query.observe(batch.filter("v > 0"), F.count(F.lit(1)).alias("n"), F.sum("v").alias("total"),
                             F.expr("collect_set(k)").alias("keys"))
    return observed.groupBy("k").agg(F.sum("v").alias("s"))


def test_an_observed_query_reused_over_each_batch_reports_each_batch_s_own_metrics(spark: Any, tmp_path: Path) -> None:
    """The kept plan's ``observe()`` (its ``CollectMetrics`` made over the first batch) gives each
    later batch's action that batch's metrics, through an observation registered per batch under
    the kept node's name and DataFrame id; built anew every batch (fresh attributes), the same."""
    kept = AnalyzedQuery(lambda batch: _observed(kept, batch))
    fresh = AnalyzedQuery(lambda batch: _observed(fresh, batch))
    got: list[tuple[Any, ...]] = []

    def each(df: Any, _: int) -> None:
        sums = _sums(kept.over(df, key="bigint"))
        metrics = kept.metrics()
        fresh_sums = _sums(fresh.over(df.selectExpr("k", "v + 0 AS v")))
        got.append((sums, metrics["n"], metrics["total"], sorted(metrics["keys"]), fresh_sums, fresh.metrics()["n"]))

    _run(spark, tmp_path, _stream_of_files(spark, tmp_path, BATCHES), each)
    assert got == [(s, len(b), sum(v for _, v in b), sorted({k for k, _ in b}), s, len(b))
                   for s, b in zip(SUMS, BATCHES, strict=True)]
    assert kept.reused == 2 and not kept.broken, "the observed plan was kept and reused"
    assert fresh.broken and fresh.reused == 0


def test_metrics_are_asked_of_a_query_without_an_observation(spark: Any, tmp_path: Path) -> None:
    query = AnalyzedQuery(lambda batch: batch.groupBy("k").count())
    errors: list[str] = []

    def each(df: Any, _: int) -> None:
        query.over(df).collect()
        try:
            query.metrics()
        except RuntimeError as e:
            errors.append(str(e))

    _run(spark, tmp_path, _stream_of_files(spark, tmp_path, BATCHES[:2]), each)
    assert errors == ["no observe() in the query, or no query since the last metrics()"] * 2
