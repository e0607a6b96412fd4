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

Through py4j on Spark's classic (not Connect) API: ``TreeNode.children``/``withNewChildren``,
``AnalysisHelper.setAnalyzed`` and ``Dataset.ofRows``, all public in the JVM. Should any of
them be missing (another Spark), the query is built anew every batch, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

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

    def over(self, batch: DataFrame, key: Any = None) -> DataFrame:
        """The query over ``batch``; ``key`` (hashable) is whatever else the query's text depends on."""
        if self.broken:
            return self.build(batch)
        try:
            leaf = batch._jdf.queryExecution().analyzed()
            t = self.template
            if t is not None and t.key == key:
                if t.output.equals(leaf.output()):
                    query = self._reuse(batch, leaf, t)
                    self.reused += 1
                    return query
                # a batch DataFrame built anew every batch (fresh expression ids): never reusable
                self.broken = True
                self.template = None
                return self.build(batch)
        except Exception as e:  # py4j errors: a Spark without these calls
            log.warning("lowwater: cannot reuse the analysed plan of the batch query (%s); building it every batch", e)
            self.broken = True
            self.template = None
            return self.build(batch)
        query = self.build(batch)
        try:
            self.template = self._template(query._jdf.queryExecution().analyzed(), leaf, key)
            self.broken = self.template is None  # the batch is not in the query once: nothing to put it in
        except Exception as e:
            log.warning("lowwater: cannot reuse the analysed plan of the batch query (%s); building it every batch", e)
            self.broken = True
            self.template = None
        return query

    @staticmethod
    def _template(plan: Any, leaf: Any, key: Any) -> _Template | None:
        path: list[tuple[Any, int, list[Any]]] = []
        node = plan
        while not node.equals(leaf):
            children = node.children()
            kids = [children.apply(i) for i in range(children.size())]
            below = [i for i, kid in enumerate(kids) if _contains(kid, leaf)]
            if len(below) != 1:  # not there, or there twice (a self-join): no reuse
                return None
            path.append((node, below[0], kids))
            node = kids[below[0]]
        if not path:
            return None
        return _Template(key, leaf.output(), path)

    def _reuse(self, batch: DataFrame, leaf: Any, t: _Template) -> DataFrame:
        from pyspark.sql import DataFrame

        jvm = batch.sparkSession._jvm
        assert jvm is not None
        to_seq = jvm.org.apache.spark.api.python.PythonUtils.toSeq
        node = leaf
        path: list[tuple[Any, int, list[Any]]] = []
        for parent, i, kids in reversed(t.path):
            kids = [*kids[:i], node, *kids[i + 1:]]
            node = parent.withNewChildren(to_seq(kids))
            path.append((node, i, kids))
        node.setAnalyzed()
        path.reverse()
        self.template = _Template(t.key, t.output, path)
        jdf = jvm.org.apache.spark.sql.classic.Dataset.ofRows(batch.sparkSession._jsparkSession, node)
        return DataFrame(jdf, batch.sparkSession)


def _contains(plan: Any, leaf: Any) -> bool:
    """Whether ``leaf`` is ``plan`` or a node under it (by Scala's ``==``, a one-time walk)."""
    if plan.equals(leaf):
        return True
    children = plan.children()
    return any(_contains(children.apply(i), leaf) for i in range(children.size()))
