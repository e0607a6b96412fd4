"""Fault injection for the crash tests: SIGKILL the driver at a named point of a batch.

``LOWWATER_FAULT=<batch_id>:<point>[,<batch_id>:<point>...]`` makes the process kill itself
with SIGKILL the first time it reaches one of the listed points while handling that batch
(the end-of-input step counts as the batch after the last micro-batch). Points, in the order
a batch passes them:

``start``
    the batch's clock is recorded, nothing else done (between batches);
``state_write``
    inside the state commit: part of the new state file's bytes are in its temporary file,
    not yet renamed (:mod:`lowwater.spark.state`);
``after_state``
    the new state is committed, no sink written;
``dir_sink_write``
    inside a :class:`~lowwater.spark.sinks.DirectorySink` write: the part file is written,
    ``_SUCCESS`` and the rename into ``batch=<id>`` are not (the first directory sink of the
    batch to get there);
``pg_staged``
    inside a :class:`~lowwater.spark.sinks.PostgresSink` write: the staging table is
    written, the upsert transaction not begun (only in batches with rows for the table);
``pg_uncommitted``
    inside the upsert transaction: the upsert has run, the commit has not;
``after_first_sink``
    the batch's first sink is written, the others not;
``after_sinks``
    every sink is written; the batch's metrics are not, and Spark has not committed it.

With ``LOWWATER_FAULT_QUERIES=<n>`` (default 1), the kill waits for ``n`` streaming queries
of the process: each query that reaches a listed point stops there, and the ``n``-th to reach
one kills the process, so several queries in one driver are each killed at a chosen point (the
crash tests run two pipelines in one driver this way).

The variables are read once, at import: with them unset every hook is one set lookup on an
empty frozenset. A malformed value fails the import, so a typo cannot silently test nothing.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

__all__ = ["POINTS", "armed", "at", "parse"]

log = logging.getLogger("lowwater.spark")

POINTS = (
    "start", "state_write", "after_state", "dir_sink_write", "pg_staged", "pg_uncommitted",
    "after_first_sink", "after_sinks",
)


def parse(spec: str) -> frozenset[tuple[int, str]]:
    """The ``(batch_id, point)`` pairs of a ``LOWWATER_FAULT`` value (ValueError if malformed)."""
    out = set()
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        batch, sep, point = item.partition(":")
        if not sep or not batch.strip().isdigit() or point.strip() not in POINTS:
            raise ValueError(f"LOWWATER_FAULT: {item!r} is not <batch_id>:<point> with a point among {POINTS}")
        out.add((int(batch), point.strip()))
    return frozenset(out)


_ARMED = parse(os.environ.get("LOWWATER_FAULT", ""))


def _queries(spec: str) -> int:
    if not spec.strip().isdigit() or int(spec) < 1:
        raise ValueError(f"LOWWATER_FAULT_QUERIES: {spec!r} is not a number of queries (1 or more)")
    return int(spec)


_QUERIES = _queries(os.environ.get("LOWWATER_FAULT_QUERIES", "1"))
_reached: list[str] = []
_lock = threading.Lock()


def armed(point: str, batch_id: int) -> bool:
    """Whether ``at(point, batch_id)`` would kill (to prepare a half-done write first)."""
    return bool(_ARMED) and (batch_id, point) in _ARMED


def at(point: str, batch_id: int) -> None:
    """SIGKILL this process if ``LOWWATER_FAULT`` names this point of this batch."""
    if not armed(point, batch_id):
        return
    with _lock:
        _reached.append(f"batch {batch_id}, {point}")
        waiting = _QUERIES - len(_reached)
    if waiting > 0:  # this query stops here; the last query to reach a point kills the process
        log.warning("LOWWATER_FAULT: batch %d, %s reached, waiting for %d more queries", batch_id, point, waiting)
        threading.Event().wait()
    said = "; ".join(_reached)
    log.warning("LOWWATER_FAULT: killing the driver at %s", said)
    sys.stderr.write(f"LOWWATER_FAULT: killing the driver at {said}\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
