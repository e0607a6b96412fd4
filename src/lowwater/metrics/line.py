"""One metrics line: what one micro-batch did, with the same meaning on every path.

A :class:`MetricsLine` is what the metrics log (:mod:`lowwater.metrics.log`) holds, one per
batch. Its counters (``rows_*``, ``operator_rows_*``, ``windows_fired``) count this batch
alone, whichever path ran it; a reader sums lines for totals. Its watermarks are the ones
the batch was judged against (``watermark_before``) and the ones it ended with.

The processors report raw metrics, some of them as running totals: the general path (the
reference runtime's operators) keeps running totals of everything but ``rows_in`` and
``rows_dead_lettered``; the native and keyed paths count per batch, except
``rows_late_by_partition``. :meth:`MetricsLine.of_batch` turns raw metrics into a line once,
given the raw metrics after the previous batch (``before``)::

    >>> before = {"combined_watermark": 999, "rows_late": 2, "rows_late_by_partition": {"0": 2}}
    >>> now = {"combined_watermark": 1999, "rows_in": 5, "rows_late": 3, "rows_late_by_partition": {"0": 3}}
    >>> line = MetricsLine.of_batch(1, now, before, running=GENERAL_RUNNING_TOTALS, path="general")
    >>> (line.watermark_before, line.combined_watermark, line.rows_in, line.rows_late, line.rows_late_by_partition)
    (999, 1999, 5, 1, {'0': 1})

:meth:`MetricsLine.to_json` gives the log's JSON fields (their names have not changed, so
older logs read with :meth:`MetricsLine.from_json`, and what is missing there takes its default).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from lowwater.core.time import MIN_TIMESTAMP

__all__ = ["GENERAL_RUNNING_TOTALS", "NATIVE_RUNNING_TOTALS", "OPERATOR_COUNTERS", "OPERATOR_GAUGES", "MetricsLine",
           "batches_in", "before_line", "fold_lines", "processes", "running_totals"]

#: The raw counters the general path (and the reference runtime) reports as running totals.
GENERAL_RUNNING_TOTALS = frozenset({"rows_late", "windows_fired", "rows_late_by_partition", "rows_windowed",
                                    "rows_unassigned", "operator_rows_in", "operator_rows_dead_lettered"})
#: The native and keyed paths count per batch, except late rows by partition (a running total).
NATIVE_RUNNING_TOTALS = frozenset({"rows_late_by_partition"})

_COUNTERS = ("rows_in", "rows_late", "rows_dead_lettered", "rows_windowed", "rows_unassigned", "operator_rows_in",
             "operator_rows_dead_lettered", "windows_fired")
_OPTIONAL = ("dead_letter_reasons", "dead_letter_sample", "stage_a", "operator", "folded_from", "folded_batches",
             "operators")
"""Fields a line holds only when there is something to say (dead letters; the keyed path's stage A;
a line that stands for several batches; a job with several window operators)."""
OPERATOR_COUNTERS = ("operator_rows_in", "rows_windowed", "rows_late", "rows_unassigned", "operator_rows_dead_lettered",
                     "windows_fired")
"""What :attr:`MetricsLine.operators` counts per window operator, this batch's alone."""
OPERATOR_GAUGES = ("combined_watermark", "open_windows", "state_rows")
"""What :attr:`MetricsLine.operators` holds per window operator as of the end of the batch."""

FOLDED_REASONS = 20
"""How many of the most frequent dead-letter reasons a folded line keeps."""


def running_totals(path: str | None) -> frozenset[str]:
    """The raw counters that ``path`` (``general``, ``reference``, ``native``, ``executor``,
    ``keyed``) reports as running totals."""
    return GENERAL_RUNNING_TOTALS if path in ("general", "reference") else NATIVE_RUNNING_TOTALS


def batches_in(line: Mapping[str, Any]) -> int:
    """How many batches a line (the log's JSON) stands for: one, or a folded line's count."""
    return int(line.get("folded_batches") or 1)


def fold_lines(lines: Sequence[MetricsLine]) -> MetricsLine:
    """One line for consecutive ``lines`` (by batch id; folded ones among them too): counters
    summed, late rows by partition and dead-letter reasons merged (the reasons' most frequent
    :data:`FOLDED_REASONS`), ``watermark_before`` the first line's and every other field the
    last one's, so that the line reads as the last batch's watermarks and state after all of them."""
    first, last = lines[0], lines[-1]
    late: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for x in lines:
        late.update(x.rows_late_by_partition)
        reasons.update(x.dead_letter_reasons)
    return replace(
        last, folded_from=first.batch_id if first.folded_from is None else first.folded_from,
        folded_batches=sum(batches_in({"folded_batches": x.folded_batches}) for x in lines),
        watermark_before=first.watermark_before, rows_late_by_partition=dict(late),
        dead_letter_reasons=dict(reasons.most_common(FOLDED_REASONS)),
        dead_letter_sample=next((x.dead_letter_sample for x in reversed(lines) if x.dead_letter_sample), None),
        operators=_fold_operators(lines),
        **{key: sum(getattr(x, key) for x in lines) for key in _COUNTERS},
    )


def _fold_operators(lines: Sequence[MetricsLine]) -> dict[str, dict[str, Any]]:
    """:attr:`MetricsLine.operators` of the fold of ``lines``: each operator's counters summed, its
    gauges its last line's."""
    out: dict[str, dict[str, Any]] = {}
    for x in lines:
        for name, op in x.operators.items():
            was = out.get(name, {})
            out[name] = {**{key: op.get(key) for key in OPERATOR_GAUGES},
                         **{key: int(was.get(key) or 0) + int(op.get(key) or 0) for key in OPERATOR_COUNTERS}}
    return out


def before_line(through: MetricsLine, line: MetricsLine) -> MetricsLine | None:
    """The batches before ``line``'s as one folded line, from ``through``: the fold of every batch
    up to and including ``line``'s, which a batch record keeps beside its line (``"through"``),
    so that a reader of the newest records alone (a checkpoint on a URI, whose older records are
    deleted) still counts every batch. ``None`` where ``line``'s batch is the first."""
    batches = batches_in({"folded_batches": through.folded_batches}) - 1
    if batches < 1 or through.folded_from is None:
        return None

    def minus(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
        return {k: v - b.get(k, 0) for k, v in a.items() if v - b.get(k, 0) > 0}

    return MetricsLine(
        batch_id=line.batch_id - 1, folded_from=through.folded_from, folded_batches=batches, path=line.path,
        watermark_before=through.watermark_before, combined_watermark=line.watermark_before, direct=line.direct,
        rows_late_by_partition=minus(through.rows_late_by_partition, line.rows_late_by_partition),
        dead_letter_reasons=minus(through.dead_letter_reasons, line.dead_letter_reasons), operator=line.operator,
        operators={name: {**{key: None for key in OPERATOR_GAUGES},  # not known before ``line``'s batch
                          **{key: int(op.get(key) or 0) - int(line.operators.get(name, {}).get(key) or 0)
                             for key in OPERATOR_COUNTERS}}
                   for name, op in through.operators.items()},
        **{key: getattr(through, key) - getattr(line, key) for key in _COUNTERS},
    )


def processes(lines: Iterable[Mapping[str, Any]]) -> bool:
    """Whether the job of these lines (the log's JSON) is a process function's
    (:attr:`MetricsLine.operator`): its ``rows_windowed`` are the elements it processed and its
    ``windows_fired`` the timers that fired."""
    return any(x.get("operator") == "process" for x in lines)


@dataclass(frozen=True)
class MetricsLine:
    """One batch's line of the metrics log; every counter is this batch's alone."""

    batch_id: int
    spark_batch_id: int | None = None
    """Spark's micro-batch id; ``None`` for the end-of-input step, which Spark does not run."""
    processing_time_ms: int | None = None
    end_of_input: bool = False
    path: str | None = None
    watermark_before: int | None = None
    """The combined watermark this batch's elements were judged against (``MIN`` for the first)."""
    combined_watermark: int | None = None
    """The minimum over non-idle partitions, after the batch."""
    partition_watermarks: dict[str, int] = field(default_factory=dict)
    idle_partitions: tuple[str, ...] = ()
    rows_in: int = 0
    rows_late: int = 0
    rows_late_by_partition: dict[str, int] = field(default_factory=dict)
    rows_dead_lettered: int = 0
    rows_windowed: int = 0
    rows_unassigned: int = 0
    direct: bool = True
    """The window operator is fed straight from the sources (see :mod:`lowwater.metrics.accounting`)."""
    operator_rows_in: int = 0
    operator_rows_dead_lettered: int = 0
    windows_fired: int = 0
    open_windows: int | None = None
    """Per key; ``None`` on the native paths, which keep only the open window starts."""
    open_window_starts: int | None = None
    state_rows: int | None = None
    state_bytes: int | None = None
    duration_ms: int | None = None
    dead_letter_reasons: dict[str, int] = field(default_factory=dict)
    dead_letter_sample: dict[str, Any] | None = None
    stage_a: str | None = None
    """Keyed path, a batch with input: ``sql`` (no Python per row before the operator) or ``python``."""
    operator: str | None = None
    """``process`` where the keyed operator is a process function: its ``rows_windowed`` are the
    elements it processed and its ``windows_fired`` the timers that fired; ``None`` for a window."""
    folded_from: int | None = None
    """On a line that stands for the batches ``folded_from`` to ``batch_id`` (the log keeps its
    newest lines and folds the older ones into one, :meth:`~lowwater.metrics.log.MetricsLog.fold`):
    its counters are their sums, ``watermark_before`` the first one's, the rest the last one's.
    ``None``: the line of one batch."""
    folded_batches: int | None = None
    """How many batches a folded line stands for (``None``: one)."""
    operators: dict[str, dict[str, Any]] = field(default_factory=dict)
    """With several window operators, each one's (by name, as ``window aggregate#2``): its
    :data:`OPERATOR_COUNTERS`, this batch's alone, and its :data:`OPERATOR_GAUGES`. The line's
    own fields are the first operator's, as with one; empty with one."""

    @classmethod
    def of_batch(
        cls, batch_id: int, metrics: Mapping[str, Any], before: Mapping[str, Any] | None, *,
        running: frozenset[str], path: str | None, processing_time_ms: int | None = None,
        end_of_input: bool = False, spark_batch_id: int | None = None,
    ) -> MetricsLine:
        """The line of a batch whose processor reported ``metrics``.

        ``before`` is what the processor reported after the previous batch (empty for the
        first batch, ``None`` when it is not known): the counters that ``running`` names are
        running totals and lose their value there, and its combined watermark is this batch's
        ``watermark_before``.
        """
        prev = before or {}

        def counter(key: str) -> int:
            now = int(metrics.get(key) or 0)
            return now - int(prev.get(key) or 0) if key in running else now

        late = {str(k): int(v) for k, v in (metrics.get("rows_late_by_partition") or {}).items()}
        operators = {}
        for name, op in (metrics.get("operators") or {}).items():
            was = (prev.get("operators") or {}).get(name) or {}
            operators[str(name)] = {
                **{key: op.get(key) for key in OPERATOR_GAUGES},
                **{key: int(op.get(key) or 0) - (int(was.get(key) or 0) if key in running else 0)
                   for key in OPERATOR_COUNTERS}}
        if "rows_late_by_partition" in running:
            was = {str(k): int(v) for k, v in (prev.get("rows_late_by_partition") or {}).items()}
            late = {k: v - was.get(k, 0) for k, v in late.items()}
        return cls(
            batch_id=batch_id, spark_batch_id=spark_batch_id, processing_time_ms=processing_time_ms,
            end_of_input=end_of_input, path=path,
            watermark_before=None if before is None else prev.get("combined_watermark", MIN_TIMESTAMP),
            combined_watermark=metrics.get("combined_watermark"),
            partition_watermarks={str(k): v for k, v in (metrics.get("partition_watermarks") or {}).items()},
            idle_partitions=tuple(sorted(str(p) for p in metrics.get("idle_partitions") or [])),
            rows_late_by_partition={k: v for k, v in late.items() if v},
            direct=bool(metrics.get("direct", True)),
            open_windows=metrics.get("open_windows"), open_window_starts=metrics.get("open_window_starts"),
            state_rows=metrics.get("state_rows", metrics.get("open_windows")),
            state_bytes=metrics.get("state_bytes"), duration_ms=metrics.get("duration_ms"),
            dead_letter_reasons=dict(metrics.get("dead_letter_reasons") or {}),
            dead_letter_sample=metrics.get("dead_letter_sample") or None,
            stage_a=metrics.get("stage_a"),
            operator="process" if "rows_processed" in metrics else None, operators=operators,
            **{key: counter(key) for key in _COUNTERS},
        )

    @classmethod
    def of_record(cls, record: Mapping[str, Any], before: Mapping[str, Any] | None, *, running: frozenset[str],
                  path: str | None) -> MetricsLine:
        """The line of a batch record (``{"batch_id", "clock_ms", "end_of_input", "spark_batch_id",
        "metrics"}``, see :mod:`lowwater.spark.state`); the rest as :meth:`of_batch`."""
        end = bool(record.get("end_of_input", False))
        return cls.of_batch(
            int(record["batch_id"]), record.get("metrics") or {}, before, running=running, path=path,
            processing_time_ms=record.get("clock_ms"), end_of_input=end,
            spark_batch_id=record.get("spark_batch_id", None if end else int(record["batch_id"])),
        )

    def to_json(self) -> dict[str, Any]:
        """The log's JSON object (dead-letter fields only when the batch had dead letters)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _OPTIONAL}
        out["partition_watermarks"] = dict(self.partition_watermarks)
        out["idle_partitions"] = list(self.idle_partitions)
        out["rows_late_by_partition"] = dict(self.rows_late_by_partition)
        if self.dead_letter_reasons:
            out["dead_letter_reasons"] = dict(self.dead_letter_reasons)
        if self.dead_letter_sample:
            out["dead_letter_sample"] = dict(self.dead_letter_sample)
        if self.stage_a is not None:
            out["stage_a"] = self.stage_a
        if self.operator is not None:
            out["operator"] = self.operator
        if self.folded_from is not None:
            out["folded_from"], out["folded_batches"] = self.folded_from, self.folded_batches
        if self.operators:
            out["operators"] = {name: dict(op) for name, op in self.operators.items()}
        return out

    @classmethod
    def from_json(cls, line: Mapping[str, Any]) -> MetricsLine:
        """A line as the log holds it; fields an older line lacks take their defaults."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in line.items() if k in known}
        values["batch_id"] = int(line["batch_id"])
        values["idle_partitions"] = tuple(str(p) for p in line.get("idle_partitions") or ())
        for key in ("partition_watermarks", "rows_late_by_partition", "dead_letter_reasons"):
            values[key] = {str(k): v for k, v in (line.get(key) or {}).items()}
        for key in _COUNTERS:
            values[key] = int(line.get(key) or 0)
        values["end_of_input"] = bool(line.get("end_of_input", False))
        values["direct"] = bool(line.get("direct", True))
        values["operators"] = {str(name): dict(op) for name, op in (line.get("operators") or {}).items()}
        return cls(**values)
