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

The variable is read once, at import: with it unset every hook is one set lookup on an
empty frozenset. A malformed value fails the import, so a typo cannot silently test nothing.
"""

from __future__ import annotations

import logging
import os
import signal
import sys

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


def armed(point: str, batch_id: int) -> bool:
    """Whether ``at(point, batch_id)`` would kill (to prepare a half-done write first)."""
    return bool(_ARMED) and (batch_id, point) in _ARMED


def at(point: str, batch_id: int) -> None:
    """SIGKILL this process if ``LOWWATER_FAULT`` names this point of this batch."""
    if armed(point, batch_id):
        log.warning("LOWWATER_FAULT: killing the driver at batch %d, %s", batch_id, point)
        sys.stderr.write(f"LOWWATER_FAULT: killing the driver at batch {batch_id}, {point}\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
