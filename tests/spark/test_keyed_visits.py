"""Which stored keys stage B of the keyed path visits (no Spark needed): of every stored version of
a bucket's keys, the newest per live key, split into the keys with elements in the batch or a
timer due, and the others (which a compacting batch writes again as they are)."""

from __future__ import annotations

import random

import pyarrow as pa

from lowwater.core.time import MAX_TIMESTAMP
from lowwater.spark.keyed import _visits

DUE, CLOCK = 10_000, 50_000


def _stored(rows: list[tuple[str, int, bytes, int, int, bool]]) -> pa.Table:
    names = ["_kb", "_v", "state", "next_event", "next_proc", "live"]
    types = [pa.string(), pa.int64(), pa.binary(), pa.int64(), pa.int64(), pa.bool_()]
    return pa.table({n: pa.array([r[i] for r in rows], t) for i, (n, t) in enumerate(zip(names, types, strict=True))})


ROWS = [
    # key, batch, state, next event timer, next processing timer, live
    ("touched", 1, b"t1", MAX_TIMESTAMP, MAX_TIMESTAMP, True),
    ("touched", 3, b"t3", 20_000, MAX_TIMESTAMP, True),
    ("event-due", 2, b"e2", DUE, MAX_TIMESTAMP, True),
    ("event-later", 2, b"l2", DUE + 1, MAX_TIMESTAMP, True),
    ("proc-due", 1, b"p1", MAX_TIMESTAMP, CLOCK, True),
    ("was-due", 1, b"w1", 5_000, MAX_TIMESTAMP, True),  # due in its old version, not in its newest
    ("was-due", 4, b"w4", 30_000, MAX_TIMESTAMP, True),
    ("gone", 1, b"g1", 5_000, MAX_TIMESTAMP, True),  # its newest version is a tombstone
    ("gone", 2, None, MAX_TIMESTAMP, MAX_TIMESTAMP, False),
    ("gone-touched", 1, b"x1", MAX_TIMESTAMP, MAX_TIMESTAMP, True),
    ("gone-touched", 5, None, MAX_TIMESTAMP, MAX_TIMESTAMP, False),
]


def test_the_newest_live_version_of_each_key_with_elements_or_a_due_timer_whatever_the_row_order() -> None:
    elements = pa.chunked_array([["touched", "new-key", "gone-touched", "touched"]])
    rows = list(ROWS)
    for seed in range(5):
        random.Random(seed).shuffle(rows)
        visit, others = (dict(zip(t["_kb"].to_pylist(), t["state"].to_pylist(), strict=True))
                         for t in _visits(_stored(rows), elements, DUE, CLOCK))
        assert visit == {"touched": b"t3", "event-due": b"e2", "proc-due": b"p1"}
        assert others == {"event-later": b"l2", "was-due": b"w4"}  # the tombstoned keys in neither


def test_nothing_stored_or_nothing_to_visit() -> None:
    assert [t.num_rows for t in _visits(_stored([]), pa.chunked_array([["a"]], pa.string()), DUE, CLOCK)] == [0, 0]
    untouched = [r for r in ROWS if r[0] in ("event-later", "was-due", "gone")]
    visit, others = _visits(_stored(untouched), pa.chunked_array([[]], pa.string()), DUE, CLOCK)
    assert visit.num_rows == 0 and sorted(others["_kb"].to_pylist()) == ["event-later", "was-due"]
