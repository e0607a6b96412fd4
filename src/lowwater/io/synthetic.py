"""A deterministic synthetic event stream for demos, tests and benchmarks.

The stream is a sequence of *slots* ``n = 0, 1, 2, ...``; batch ``i`` of ``rows`` slots
covers ``n = i * rows ... (i + 1) * rows - 1`` (so every batch of one stream must be asked
for with the same ``rows``). Slot ``n`` belongs to partition ``p = n % partitions`` and,
if it produces a record, that record has:

* ``offset = n // partitions`` (dense per partition: slots go round-robin);
* source ``timestamp = a(n) = start_ms + (n * 1000) // events_per_second``, the append
  time, which advances with the batch index at ``events_per_second``;
* event time ``ts = a(n) - lag(p) - d`` where ``lag(p) = lag_ms`` for the lagging
  partition and 0 otherwise, and ``d`` is uniform in ``[0, disorder_ms]``. Within a
  partition ``ts >= max(earlier ts) - disorder_ms``, so a bounded-out-of-orderness
  watermark of ``disorder_ms`` per partition finds no late record;
* with probability ``late_fraction``, instead ``ts = a(n) - lag(p) - disorder_ms -
  late_by_ms``: a record behind its partition's disorder bound by ``late_by_ms``;
* value ``{"key": f"k{u % keys}", "ts": ts, "value": u' % 1000}``.

The lagging partition is on time by Flink's rules (its own watermark trails with it) but
a single watermark computed from the global maximum event time calls its records late by
about ``lag_ms``. The idle partition produces no record once ``a(n) - start_ms >=
idle_after_ms``, so later batches may hold fewer than ``rows`` records.

Randomness: batch ``i`` draws ``4 * rows`` little-endian unsigned 64-bit integers from
``random.Random(seed + i).randbytes`` (disorder, late, key, value per slot) and maps them
with integer arithmetic only. Any batch can be produced on its own, in any order, and
:meth:`SyntheticStream.batch` (pure Python) and :meth:`SyntheticStream.batch_columns`
(NumPy, for speed) produce the same records.
"""

from __future__ import annotations

import random
import struct
from typing import TYPE_CHECKING, Any

from lowwater.core.errors import ConfigurationError
from lowwater.io.log import LogRecord, PartitionedLogWriter

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["SyntheticStream"]

_DRAWS_PER_SLOT = 4  # disorder, late, key, value
_VALUE_RANGE = 1000
_LATE_BITS = 53  # the late draw compares the top 53 bits with late_fraction * 2**53


def _require(parameter: str, ok: bool, message: str) -> None:
    if not ok:
        raise ConfigurationError(parameter, message)


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


class SyntheticStream:
    """Deterministic multi-partition event stream with disorder, lag, idleness and lateness.

    Parameters
    ----------
    partitions : int, default 4
        Number of partitions, ``>= 1``.
    keys : int, default 1000
        Number of distinct keys ``k0 ... k<keys-1>``, drawn uniformly.
    events_per_second : int, default 1000
        Slots per second of append time across all partitions.
    disorder_ms : int, default 0
        Bound of the per-partition out-of-orderness of on-time records.
    lagging_partition : int, optional
        Partition whose event times trail the others by ``lag_ms``.
    lag_ms : int, default 0
        Lag of the lagging partition.
    idle_partition : int, optional
        Partition that stops producing.
    idle_after_ms : int, optional
        Append time (relative to ``start_ms``) at which the idle partition stops; ``None``
        with an ``idle_partition`` means it never produces.
    late_fraction : float, default 0.0
        Probability, per record, of being late by ``late_by_ms`` beyond the disorder bound.
    late_by_ms : int, default 0
        How late the late records are.
    seed : int, default 0
        Batch ``i`` uses ``random.Random(seed + i)``.
    start_ms : int, default 0
        Append time of slot 0 in epoch ms. Event times may be below it (lag, disorder).

    Examples
    --------
    >>> s = SyntheticStream(partitions=2, keys=10, events_per_second=1000)
    >>> [(r.partition, r.offset, r.timestamp) for r in s.batch(1, 3)]
    [(1, 1, 3), (0, 2, 4), (1, 2, 5)]
    """

    def __init__(
        self,
        partitions: int = 4,
        keys: int = 1000,
        *,
        events_per_second: int = 1000,
        disorder_ms: int = 0,
        lagging_partition: int | None = None,
        lag_ms: int = 0,
        idle_partition: int | None = None,
        idle_after_ms: int | None = None,
        late_fraction: float = 0.0,
        late_by_ms: int = 0,
        seed: int = 0,
        start_ms: int = 0,
    ) -> None:
        _require("partitions", _is_int(partitions) and partitions >= 1,
                 f"must be an int >= 1, got {partitions!r}")
        _require("keys", _is_int(keys) and keys >= 1, f"must be an int >= 1, got {keys!r}")
        _require("events_per_second", _is_int(events_per_second) and events_per_second >= 1,
                 f"must be an int >= 1, got {events_per_second!r}")
        for name, ms in (("disorder_ms", disorder_ms), ("lag_ms", lag_ms),
                         ("late_by_ms", late_by_ms)):
            _require(name, _is_int(ms) and ms >= 0, f"must be an int >= 0 ms, got {ms!r}")
        for name, part in (("lagging_partition", lagging_partition),
                           ("idle_partition", idle_partition)):
            _require(name, part is None or (_is_int(part) and 0 <= part < partitions),
                     f"must be None or a partition in [0, {partitions}), got {part!r}")
        _require("idle_after_ms", idle_after_ms is None or (_is_int(idle_after_ms)
                                                            and idle_after_ms >= 0),
                 f"must be None or an int >= 0 ms, got {idle_after_ms!r}")
        _require("late_fraction", isinstance(late_fraction, (int, float))
                 and 0.0 <= late_fraction <= 1.0,
                 f"must be a probability in [0, 1], got {late_fraction!r}")
        _require("seed", _is_int(seed), f"must be an int, got {seed!r}")
        _require("start_ms", _is_int(start_ms), f"must be an int (epoch ms), got {start_ms!r}")
        self.partitions = partitions
        self.keys = keys
        self.events_per_second = events_per_second
        self.disorder_ms = disorder_ms
        self.lagging_partition = lagging_partition
        self.lag_ms = lag_ms
        self.idle_partition = idle_partition
        self.idle_after_ms = idle_after_ms
        self.late_fraction = float(late_fraction)
        self.late_by_ms = late_by_ms
        self.seed = seed
        self.start_ms = start_ms
        self._late_threshold = int(self.late_fraction * 2**_LATE_BITS)

    # ------------------------------------------------------------------ formulas

    @property
    def idle_from_slot(self) -> int | None:
        """First slot at which the idle partition stops, ``ceil(idle_after * eps / 1000)``.

        ``a(n) - start >= idle_after`` iff ``n * 1000 // eps >= idle_after`` iff
        ``n >= idle_after * eps / 1000``. ``None`` without an idle partition.
        """
        if self.idle_partition is None:
            return None
        if self.idle_after_ms is None:
            return 0
        return -(-self.idle_after_ms * self.events_per_second // 1000)

    def append_time(self, slot: int) -> int:
        """``a(n) = start_ms + (n * 1000) // events_per_second``."""
        return self.start_ms + slot * 1000 // self.events_per_second

    def expected_end_offsets(self, batches: int, rows_per_batch: int) -> dict[int, int]:
        """End offset of every partition after ``batches`` batches of ``rows_per_batch``.

        Partition ``p`` owns the slots ``n < N = batches * rows_per_batch`` with
        ``n % partitions == p``: ``ceil((N - p) / partitions)`` of them (the idle
        partition only those below :attr:`idle_from_slot`).
        """
        self._check_batch(batches, rows_per_batch, ("batches", "rows_per_batch"))
        total = batches * rows_per_batch
        out = {}
        for p in range(self.partitions):
            limit = total
            if p == self.idle_partition:
                limit = min(total, self.idle_from_slot or 0)
            out[p] = max(0, -(-(limit - p) // self.partitions))
        return out

    @staticmethod
    def _check_batch(i: int, rows: int, names: tuple[str, str] = ("i", "rows")) -> None:
        _require(names[0], _is_int(i) and i >= 0, f"must be an int >= 0, got {i!r}")
        _require(names[1], _is_int(rows) and rows >= 0, f"must be an int >= 0, got {rows!r}")

    def _draws(self, i: int, rows: int) -> bytes:
        return random.Random(self.seed + i).randbytes(8 * _DRAWS_PER_SLOT * rows)

    # ------------------------------------------------------------------ batches

    def batch(self, i: int, rows: int) -> list[LogRecord]:
        """Records of batch ``i`` (``rows`` slots), in slot order; pure Python.

        Returns
        -------
        list of LogRecord
            ``value = {"key": str, "ts": int, "value": int}``; ``timestamp`` is the append
            time. Offsets increase per partition; partitions interleave round-robin.
        """
        self._check_batch(i, rows)
        u = struct.unpack(f"<{_DRAWS_PER_SLOT * rows}Q", self._draws(i, rows))
        parts, eps, start = self.partitions, self.events_per_second, self.start_ms
        lagging, lag = self.lagging_partition, self.lag_ms
        idle, idle_from = self.idle_partition, self.idle_from_slot
        disorder_mod, keys = self.disorder_ms + 1, self.keys
        late_threshold, late_shift = self._late_threshold, 64 - _LATE_BITS
        late_back = self.disorder_ms + self.late_by_ms
        names = [f"k{k}" for k in range(keys)] if keys <= max(rows, 1024) else None
        if idle is None or idle_from is None:
            stop = rows  # slots j >= stop of the idle partition produce nothing
        else:
            stop = min(rows, max(0, idle_from - i * rows))
        out: list[LogRecord] = []
        append = out.append
        n = i * rows
        for j, (u_jitter, u_late, u_key, u_value) in enumerate(
            zip(u[0::4], u[1::4], u[2::4], u[3::4], strict=True)
        ):
            p = (n + j) % parts
            if p == idle and j >= stop:
                continue
            a = start + (n + j) * 1000 // eps
            base = a - lag if p == lagging else a
            if u_late >> late_shift < late_threshold:
                ts = base - late_back
            else:
                ts = base - u_jitter % disorder_mod
            key = names[u_key % keys] if names is not None else f"k{u_key % keys}"
            append(LogRecord(p, (n + j) // parts, a,
                             {"key": key, "ts": ts, "value": u_value % _VALUE_RANGE}))
        return out

    def batch_columns(self, i: int, rows: int) -> dict[str, npt.NDArray[Any]]:
        """Batch ``i`` as NumPy columns (same records as :meth:`batch`), for benchmarks.

        Returns
        -------
        dict of str to numpy.ndarray
            ``partition``, ``offset``, ``timestamp``, ``ts``, ``value`` as ``int64`` and
            ``key`` as a unicode array, one entry per produced record, in slot order.
        """
        import numpy as np

        self._check_batch(i, rows)
        u = np.frombuffer(self._draws(i, rows), dtype="<u8").reshape(rows, _DRAWS_PER_SLOT)
        n = np.arange(i * rows, (i + 1) * rows, dtype=np.int64)
        p = n % self.partitions
        a = self.start_ms + n * 1000 // self.events_per_second
        base = a - np.where(p == self.lagging_partition, self.lag_ms, 0) \
            if self.lagging_partition is not None else a
        late = (u[:, 1] >> np.uint64(64 - _LATE_BITS)) < np.uint64(self._late_threshold)
        jitter = (u[:, 0] % np.uint64(self.disorder_ms + 1)).astype(np.int64)
        ts = base - np.where(late, self.disorder_ms + self.late_by_ms, jitter)
        key_id = (u[:, 2] % np.uint64(self.keys)).astype(np.int64)
        value = (u[:, 3] % np.uint64(_VALUE_RANGE)).astype(np.int64)
        columns = {
            "partition": p,
            "offset": n // self.partitions,
            "timestamp": a,
            "key": _key_names(np, key_id, self.keys),
            "ts": ts,
            "value": value,
        }
        if self.idle_partition is not None:
            keep = ~((p == self.idle_partition) & (n >= (self.idle_from_slot or 0)))
            columns = {name: col[keep] for name, col in columns.items()}
        return columns

    # ------------------------------------------------------------------ writing

    def write_to(
        self,
        writer: PartitionedLogWriter,
        batches: int,
        rows_per_batch: int,
        *,
        start_batch: int = 0,
    ) -> int:
        """Append batches ``start_batch ... start_batch + batches - 1`` to a log.

        Each batch becomes one segment per partition; the log's offsets then equal the
        stream's offsets. Returns the number of records written.

        Raises
        ------
        ConfigurationError
            ``writer``: the log's end offsets are not the stream's offsets after
            ``start_batch`` batches (write to an empty log, or continue where it ends).
        """
        self._check_batch(start_batch, rows_per_batch, ("start_batch", "rows_per_batch"))
        _require("batches", _is_int(batches) and batches >= 0,
                 f"must be an int >= 0, got {batches!r}")
        expected = self.expected_end_offsets(start_batch, rows_per_batch)
        actual = writer.end_offsets()
        found = {p: actual.get(p, 0) for p in range(self.partitions)}
        extra = sorted(set(actual) - set(expected))
        if found != expected or extra:
            raise ConfigurationError(
                "writer",
                f"the log at {writer.root} has end offsets {actual}, but batch {start_batch} "
                f"of this stream starts at {expected}; use an empty log or the matching "
                "start_batch",
            )
        for p in range(self.partitions):
            writer.create_partition(p)
        written = 0
        for i in range(start_batch, start_batch + batches):
            records = self.batch(i, rows_per_batch)
            by_partition: dict[int, list[LogRecord]] = {}
            for r in records:
                by_partition.setdefault(r.partition, []).append(r)
            for p, part in sorted(by_partition.items()):
                offsets = writer.append(
                    p, [r.value or {} for r in part], [r.timestamp for r in part]
                )
                if offsets != [r.offset for r in part]:  # pragma: no cover - checked above
                    raise ConfigurationError(
                        "writer", f"log assigned offsets {offsets[:3]}... to partition {p}, "
                        f"expected {[r.offset for r in part][:3]}...; another writer?"
                    )
            written += len(records)
        return written

    def __repr__(self) -> str:
        return (
            f"SyntheticStream(partitions={self.partitions}, keys={self.keys}, "
            f"events_per_second={self.events_per_second}, disorder_ms={self.disorder_ms}, "
            f"lagging_partition={self.lagging_partition}, lag_ms={self.lag_ms}, "
            f"idle_partition={self.idle_partition}, idle_after_ms={self.idle_after_ms}, "
            f"late_fraction={self.late_fraction}, late_by_ms={self.late_by_ms}, "
            f"seed={self.seed}, start_ms={self.start_ms})"
        )


def _key_names(np: Any, key_id: npt.NDArray[Any], keys: int) -> npt.NDArray[Any]:
    """``"k" + str(id)`` for every id, vectorised (a table lookup when the table is small)."""
    if keys <= max(len(key_id), 1024):
        table = np.array([f"k{k}" for k in range(keys)])
        return table[key_id]  # type: ignore[no-any-return]
    return np.char.add("k", key_id.astype(str))  # type: ignore[no-any-return]
