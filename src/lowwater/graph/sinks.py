"""Sinks for the reference runtime: each receives whole micro-batches, idempotently."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["CollectSink", "ForeachBatchSink", "FunctionSink", "PrintSink", "Sink"]


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


class CollectSink(Sink):
    """Keeps every row in memory, per batch (a replayed batch replaces its rows)."""

    def __init__(self) -> None:
        self.by_batch: dict[int, list[Any]] = {}

    def write_batch(self, batch_id: int, rows: Sequence[Any]) -> None:
        self.by_batch[batch_id] = list(rows)

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
