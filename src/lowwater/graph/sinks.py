"""Sinks for the reference runtime: each receives whole micro-batches, idempotently."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["CollectSink", "ForeachBatchSink", "FunctionSink", "PrintSink", "Sink", "bind_job", "check_distinct_targets",
           "check_takes_output"]


class Sink:
    """Receives the rows of each micro-batch once the batch is complete.

    ``write_batch`` may be called again with the same ``batch_id`` after a restart;
    a sink that must be exactly-once replaces that batch's rows instead of appending.
    """

    def open(self) -> None:
        pass

    def write_batch(self, batch_id: int, rows: Sequence[Any]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def bind_job(self, job_id: str | None, resumes: bool = True) -> None:
        """Before the first batch: the job this sink writes for. On Spark it is made with the
        checkpoint, so a new checkpoint is a new job whose batch ids start again at 0 (None: a
        checkpoint made before jobs had ids); each reference run is a new job that never
        resumes (``resumes`` False). A sink that keys its exactly-once writes by the job takes it
        here (:class:`~lowwater.spark.sinks.DeltaSink`'s ``txnAppId``; a
        :class:`~lowwater.spark.sinks.DirectorySink` refuses a directory another job's batches
        are in, on both runtimes); others ignore it."""

    def batch_target(self) -> str | None:
        """Where this sink keeps each batch id's rows, replacing those a write of the same id left
        there (that is how it is exactly-once), said for a person: ``"the directory /out"``. Two
        outputs written to one target would replace each other's batches, so a pipeline refuses
        that (:func:`check_distinct_targets`). ``None``: the sink appends, or calls a function,
        and may take several outputs."""
        return None

    #: whether this sink takes window results only (a PostgreSQL upsert on the window's key and
    #: bounds): put on a window's late output or on the dead letters, which have none, it is
    #: refused when the pipeline is built (:func:`check_takes_output`)
    window_results_only = False


def check_takes_output(what: str, sink: Sink, window_results: bool) -> None:
    """Refuse a sink that takes window results only (:attr:`Sink.window_results_only`) on an
    output without them (``window_results`` False: a window's late output, the dead letters). It
    failed at the batch that first had such a row, after earlier batches were committed; and the
    checkpoint was then bound to the pipeline, so the fixed one needed a new checkpoint."""
    from lowwater.core.errors import ConfigurationError

    if getattr(sink, "window_results_only", False) and not window_results:
        raise ConfigurationError(
            "sinks", f"{sink!r} upserts window results on (key, window_start, window_end, fire_index), and "
                     f"there are none in {what}: give it a sink that appends its rows (DirectorySink, "
                     "DeltaSink, ForeachDataFrameSink)")


class CollectSink(Sink):
    """Keeps every row in memory, per batch (a replayed batch replaces its rows)."""

    def __init__(self) -> None:
        self.by_batch: dict[int, list[Any]] = {}

    def write_batch(self, batch_id: int, rows: Sequence[Any]) -> None:
        self.by_batch[batch_id] = list(rows)

    def batch_target(self) -> str:
        return f"one CollectSink (at {id(self):#x})"

    @property
    def results(self) -> list[Any]:
        return [r for b in sorted(self.by_batch) for r in self.by_batch[b]]

    def __len__(self) -> int:
        return sum(len(v) for v in self.by_batch.values())


class PrintSink(Sink):
    """Prints each row, prefixed with the batch id."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix

    def write_batch(self, batch_id: int, rows: Sequence[Any]) -> None:
        for r in rows:
            print(f"{self.prefix}[batch {batch_id}] {r}")


class FunctionSink(Sink):
    """Calls ``fn(row)`` for every row."""

    def __init__(self, fn: Callable[[Any], None]) -> None:
        self.fn = fn

    def write_batch(self, batch_id: int, rows: Sequence[Any]) -> None:
        for r in rows:
            self.fn(r)


class ForeachBatchSink(Sink):
    """Calls ``fn(rows, batch_id)`` once per micro-batch (Spark's ``foreachBatch`` shape)."""

    def __init__(self, fn: Callable[[list[Any], int], None]) -> None:
        self.fn = fn

    def write_batch(self, batch_id: int, rows: Sequence[Any]) -> None:
        self.fn(list(rows), batch_id)


def check_distinct_targets(outputs: Sequence[tuple[str, Sink]]) -> None:
    """Refuse two outputs (``(what it is, its sink)``) whose sinks keep batches in one target
    (:meth:`Sink.batch_target`): each batch id's second write would replace the first's rows,
    and one output would vanish without a word."""
    from lowwater.core.errors import ConfigurationError

    seen: dict[str, str] = {}
    for what, sink in outputs:
        target = sink.batch_target()
        if target is None:
            continue
        if target in seen:
            raise ConfigurationError(
                "sinks", f"{seen[target]} and {what} are both written to {target}, which keeps one write per "
                         "batch id: the second would replace the first's rows. Give each output a sink of its own "
                         "(another directory, table or app id)")
        seen[target] = what


def check_new_job(sinks: Sequence[Any]) -> None:
    """Before a new job's first batch (a Spark job on a new checkpoint, every reference run): each
    sink class's own check over its sinks of the job, a ``check_new_job`` class method given them
    all at once (:class:`~lowwater.spark.sinks.DeltaSink`'s refuses a table another job appended
    to, which it reads from the table's transactions)."""
    groups: dict[Any, list[Any]] = {}
    for sink in sinks:
        check = getattr(type(sink), "check_new_job", None)
        if callable(check):
            groups.setdefault(check, []).append(sink)
    for check, group in groups.items():
        check(group)


def bind_job(sinks: Sequence[Any], job_id: str | None, resumes: bool = True) -> None:
    """Tell each sink the job it writes for (:meth:`Sink.bind_job`), also a sink that is not a
    :class:`Sink` but has the method."""
    for sink in sinks:
        bind = getattr(sink, "bind_job", None)
        if callable(bind):
            bind(job_id, resumes)
