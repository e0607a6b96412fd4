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
    ``rows`` is this batch's; ``count`` is the running total."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.count = 0

    def add(self, record: Record, error: BadRecordError) -> None:
        row = {"reason": error.reason, "partition": record.partition, "offset": record.offset,
               "record": record.value}
        if record.source is not None:
            row["source"] = record.source
        self.rows.append(row)
        self.count += 1
