"""The job's dead-letter output, shared by its nodes."""

from __future__ import annotations

from typing import Any

from lowwater.core.errors import BadRecordError
from lowwater.runtime.records import Record

__all__ = ["DeadLetters"]


class DeadLetters:
    """The job's dead-letter output: records an operator could not process because of their
    data (:class:`BadRecordError`), each as ``{"reason", "partition", "offset", "record"}``
    like the Spark engine's, and ``"source"``, the source's name, in a job with several sources.
    ``rows`` is this batch's (:meth:`new_batch` starts the next); ``count`` is the running total.

    One letter per element and reason: an element that several operators reject for the same
    reason (a missing timestamp or key reaching four window operators of one source, as a Spark
    ``agg(sum, count, avg, max)`` becomes) is one dead letter, where it was one per operator, so a
    dead-letter table held each bad record up to four times and the job's ``rows_dead_lettered``
    exceeded its ``rows_in`` (a user probe, session 58). Each operator still counts the records it
    rejected in its own account (``operator_rows_dead_lettered``). The operators of a job get
    the same :class:`Record` object from a fan-out, so identity tells that it is one element."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.count = 0
        self._seen: dict[int, tuple[Record, set[str]]] = {}  # id: the record (kept, so ids stay its), reasons

    def new_batch(self) -> None:
        self.rows = []
        self._seen = {}

    def add(self, record: Record, error: BadRecordError) -> None:
        seen = self._seen.setdefault(id(record), (record, set()))[1]
        if error.reason in seen:
            return
        seen.add(error.reason)
        row = {"reason": error.reason, "partition": record.partition, "offset": record.offset,
               "record": record.value}
        if record.source is not None:
            row["source"] = record.source
        self.rows.append(row)
        self.count += 1
