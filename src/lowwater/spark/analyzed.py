"""A query over each micro-batch, parsed and analysed once per run instead of once per batch.

Spark's own streaming query is analysed once: each micro-batch, ``IncrementalExecution`` only
puts the batch's data in place of the source in the plan it already has. lowwater's native path
runs its own query inside ``foreachBatch``, over a new DataFrame each batch, and Spark parses
and analyses that query again every time: measured in session 16 (docs/performance.md), the
JIT was still compiling the SQL parser (127 methods) and the analyzer (703, against 56 for
Spark's query) late in a run, and the batch's planning took 470 ms early in a run and 120 ms
once warm.

:class:`AnalyzedQuery` keeps the analysed plan of the query it built over the first batch
and, for each later batch, replaces in it only the node that was that batch's DataFrame
(Spark's ``LogicalRDD`` over the batch's data) with the new batch's, rebuilding just the
nodes on the path from it to the root (``withNewChildren``) and marking them analysed, so
Spark's analyzer returns the plan as it is (``Analyzer.executeAndCheck``). The optimizer and
the physical planning still run every batch, as they do for Spark's own query.

Safe only because the new batch's DataFrame has the *same output attributes*: the same names,
types and expression ids. Spark gives every batch handed to ``foreachBatch`` the streaming
plan's own output attributes, so the ids are stable from batch to batch; anything else (a
schema that changed, a DataFrame built anew each batch with fresh ids, as the executor
watermarks' is) builds the query anew, as before. The last plan is kept (its batch's RDD with
it, as Spark keeps the last batch's), never older ones.

A query may hold one ``observe()`` (:meth:`AnalyzedQuery.observe`, called by ``build``): its
metrics are read after each batch's action with :meth:`AnalyzedQuery.metrics`. The plan kept
holds the ``CollectMetrics`` node of the first batch, with its name and the id of the DataFrame
it was made on; Spark completes an ``Observation`` registered under that name and id when the
plan runs. So each later batch registers a new one under the same pair
(``ObservationManager.getOrNewObservation``), where building anew would call
``Dataset.observe``, ``filter`` and ``select`` again and analyse the whole plan at each. With the
native path's observe, filter and projection in the kept plan, the median time between two
1k-key batches' jobs went from 210 to 190 ms (session 22, docs/performance.md).

Through py4j on Spark's classic (not Connect) API: ``TreeNode.children``/``withNewChildren``,
``AnalysisHelper.setAnalyzed``, ``Dataset.ofRows`` and ``ObservationManager.getOrNewObservation``,
all public in the JVM. Should any of them be missing (another Spark), the query is built anew
every batch, as before.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["AnalyzedQuery"]

log = logging.getLogger(__name__)


@dataclass
class _Template:
    key: Any
    output: Any
    """The replaced node's output attributes (a JVM ``Seq[Attribute]``)."""
    path: list[tuple[Any, int, list[Any]]]
    """From the root down to the replaced node's parent: (node, the index of the child on the
    path, its children)."""
    observed_id: int | None = None
    """The id of the DataFrame the plan's ``observe()`` was made on (its ``CollectMetrics`` node's)."""


class AnalyzedQuery:
    """``build(batch)`` analysed once, then reused with each batch's own data (module docstring)."""

    def __init__(self, build: Callable[[DataFrame], DataFrame]) -> None:
        self.build = build
        self.template: _Template | None = None
        self.reused = 0
        """Batches whose query was the kept plan with their data put in (for the tests)."""
        self.broken = False
        """Build anew every batch from now on: the JVM calls failed (another Spark), or the batches'
        DataFrames do not keep their attributes from one batch to the next."""
        self.name = f"lowwater_{uuid.uuid4().hex}"
        """The name of the query's ``observe()``, if it has one (:meth:`observe`)."""
        self._observed_id: int | None = None
        self._observation: Any = None
        """The JVM ``Observation`` of the last query :meth:`over` returned."""
        self._jvm: Any = None
        self._calls: tuple[Any, Any, Any] | None = None

    def over(self, batch: DataFrame, key: Any = None) -> DataFrame:
        """The query over ``batch``; ``key`` (hashable) is whatever else the query's text depends on."""
        self._observation = None
        if self.broken:
            return self.build(batch)
        try:
            leaf = batch._jdf.queryExecution().analyzed()
            t = self.template
            if t is not None and t.key == key:
                if not t.output.equals(leaf.output()):  # a DataFrame made anew every batch: never reusable
                    return self._give_up(batch, None)
                query = self._reuse(batch, leaf, t)
                self.reused += 1
                return query
        except Exception as e:  # py4j errors: a Spark without these calls
            return self._give_up(batch, e)
        self._observed_id = None
        query = self.build(batch)  # the user's errors raise here, once
        try:
            path = _path(query._jdf.queryExecution().analyzed(), leaf)
        except Exception as e:
            return self._give_up(batch, e, query)
        if path is None:  # the batch is not in the query once: nothing to put it in
            return self._give_up(batch, None, query)
        self.template = _Template(key, leaf.output(), path, self._observed_id)
        return query

    def observe(self, df: DataFrame, *exprs: Column) -> DataFrame:
        """``df.observe(...)`` with this query's one observation, for ``build`` to call: the metrics
        of each batch's action come from :meth:`metrics`."""
        from pyspark.sql import DataFrame
        from pyspark.sql.classic.column import _to_seq

        session = df.sparkSession
        jvm = session._jvm
        assert jvm is not None
        self._jvm_calls(jvm)
        self._observed_id = int(df._jdf.id())
        self._observation = jvm.org.apache.spark.sql.Observation(self.name)
        observed = df._jdf.observe(self._observation, exprs[0]._jc, _to_seq(session.sparkContext,
                                                                                 [c._jc for c in exprs[1:]]))
        return DataFrame(observed, session)

    def metrics(self) -> dict[str, Any]:
        """The observed metrics of the last query :meth:`over` returned, once its action ran (it
        waits for them, as ``Observation.get`` does)."""
        from pyspark.serializers import CPickleSerializer

        observation, self._observation = self._observation, None
        if observation is None or self._calls is None:
            raise RuntimeError("no observe() in the query, or no query since the last metrics()")
        row = CPickleSerializer().loads(self._calls[2](observation.getRow()))  # type: ignore[no-untyped-call]
        return dict(row.asDict(recursive=False))

    def _give_up(self, batch: DataFrame, error: Exception | None, query: DataFrame | None = None) -> DataFrame:
        """Build the query anew over every batch from now on (``query``: this batch's, when built already)."""
        if error is not None:
            log.warning("lowwater: cannot reuse the analysed plan of the batch query (%s); building it every batch",
                        error)
        self.broken = True
        self.template = None
        return self.build(batch) if query is None else query

    def _jvm_calls(self, jvm: Any) -> tuple[Any, Any, Any]:
        """``PythonUtils.toSeq``, ``Dataset.ofRows`` and ``PythonSQLUtils.toPyRow``: looked up
        through py4j once (each package of a name is a round trip), not every batch."""
        if self._calls is None or self._jvm is not jvm:
            self._jvm = jvm
            self._calls = (jvm.org.apache.spark.api.python.PythonUtils.toSeq,
                           jvm.org.apache.spark.sql.classic.Dataset.ofRows,
                           jvm.org.apache.spark.sql.api.python.PythonSQLUtils.toPyRow)
        return self._calls

    def _reuse(self, batch: DataFrame, leaf: Any, t: _Template) -> DataFrame:
        from pyspark.sql import DataFrame

        to_seq, of_rows, _ = self._jvm_calls(batch.sparkSession._jvm)
        node = leaf
        path: list[tuple[Any, int, list[Any]]] = []
        for parent, i, kids in reversed(t.path):
            kids = [*kids[:i], node, *kids[i + 1:]]
            node = parent.withNewChildren(to_seq(kids))
            path.append((node, i, kids))
        node.setAnalyzed()
        path.reverse()
        self.template = _Template(t.key, t.output, path, t.observed_id)
        session = batch.sparkSession._jsparkSession
        if t.observed_id is not None:  # Spark completes it when the plan's CollectMetrics runs
            self._observation = session.observationManager().getOrNewObservation(self.name, t.observed_id)
        return DataFrame(of_rows(session, node), batch.sparkSession)


def _path(plan: Any, leaf: Any) -> list[tuple[Any, int, list[Any]]] | None:
    """From ``plan`` down to the parent of its one node equal to ``leaf`` (Scala's ``==``): each
    node, the index of the child on the way and its children. None if ``leaf`` is ``plan`` itself
    or is not under it exactly once (a self-join). One walk of the plan, once per run."""
    found: list[list[tuple[Any, int, list[Any]]]] = []

    def walk(node: Any, above: list[tuple[Any, int, list[Any]]]) -> None:
        if node.equals(leaf):
            found.append(above)
            return
        children = node.children()
        kids = [children.apply(i) for i in range(children.size())]
        for i, kid in enumerate(kids):
            walk(kid, [*above, (node, i, kids)])

    walk(plan, [])
    return found[0] if len(found) == 1 and found[0] else None
