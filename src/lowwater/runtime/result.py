"""What a reference run returns: per-batch metrics and watermark histories."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lowwater.metrics.accounting import Accounting, operator_scope
from lowwater.metrics.line import GENERAL_RUNNING_TOTALS, OPERATOR_COUNTERS, OPERATOR_GAUGES, MetricsLine
from lowwater.metrics.names import PartitionNames, named_partitions

__all__ = ["BatchMetrics", "JobResult"]


@dataclass(frozen=True)
class BatchMetrics:
    batch_id: int
    processing_time_ms: int
    rows_in: int
    end_of_input: bool
    windows: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per window operator: combined and per-partition watermarks, idle partitions, rows in,
    windowed, late (total and per partition) and unassigned (running totals), windows fired,
    open windows, state rows."""
    rows_dead_lettered: int = 0
    """Records of this batch sent to the dead-letter output (by any operator)."""


    def flat(self, direct: bool = True) -> dict[str, Any]:
        """The batch's metrics as one mapping (the first window operator's, with the job's
        rows in and dead letters): what the metrics log records. With several window operators,
        ``operators`` has each one's counters and gauges by name
        (:attr:`~lowwater.metrics.line.MetricsLine.operators`)."""
        windows = list(self.windows.values())
        flat = {**(windows[0] if windows else {}), "rows_in": self.rows_in,
                "rows_dead_lettered": self.rows_dead_lettered, "direct": direct}
        if len(windows) > 1:
            flat["operators"] = {name: {key: w.get(key) for key in (*OPERATOR_COUNTERS, *OPERATOR_GAUGES)}
                                 for name, w in self.windows.items()}
        return flat


@dataclass
class JobResult:
    job_name: str
    batches: list[BatchMetrics]
    watermark_history: dict[str, list[int]]
    """Per window operator, every combined watermark it received, in order."""
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    """Every record sent to the dead-letter output: ``{"reason", "partition", "offset", "record"}``."""
    direct: bool = False
    """One window operator fed straight from the sources (see :mod:`lowwater.metrics.accounting`)."""
    partition_names: PartitionNames | None = None
    """How :meth:`lines` name partitions (:mod:`lowwater.metrics.names`); ``None``: by their numbers.
    :attr:`batches` keep the operators' own keys (``index:number`` in a job of several sources)."""

    def lines(self) -> list[MetricsLine]:
        """One metrics line per batch (:mod:`lowwater.metrics.line`): the operators' running
        totals made counts per batch."""
        from lowwater.metrics.dead_letters import summarize_dead

        out: list[MetricsLine] = []
        before: dict[str, Any] = {}
        taken = 0  # the dead letters are listed in batch order, each batch's as many as it counts
        for b in self.batches:
            now = b.flat(self.direct)
            dead = self.dead_letters[taken:taken + b.rows_dead_lettered]
            taken += b.rows_dead_lettered
            # the batch's reasons, as a Spark batch's line has them (`lowwater status` lists them)
            reasons = summarize_dead(dead) if dead else {}
            named = {**now, **reasons}
            if self.partition_names is not None:
                named = named_partitions(named, self.partition_names)
            out.append(MetricsLine.of_batch(b.batch_id, named, before, running=GENERAL_RUNNING_TOTALS,
                                            path="reference",
                                            processing_time_ms=b.processing_time_ms, end_of_input=b.end_of_input,
                                            spark_batch_id=None if b.end_of_input else b.batch_id))
            before = now if self.partition_names is None else named_partitions(now, self.partition_names)
        return out

    def accounting(self, operator: str | None = None) -> Accounting:
        """Where every record went (the window operator named ``operator``, or the only one);
        ``.balanced`` is the invariant."""
        if not self.batches:
            return Accounting(0, 0, 0, 0)
        last = self.batches[-1].windows
        if operator is None:
            if len(last) != 1:
                raise ValueError(f"name one of the window operators: {sorted(last)}")
            operator = next(iter(last))
        w = last[operator]
        if self.direct:
            return Accounting(
                rows_in=sum(b.rows_in for b in self.batches), rows_windowed=int(w["rows_windowed"]),
                rows_late=int(w["rows_late"]), rows_dead_lettered=sum(b.rows_dead_lettered for b in self.batches),
                rows_unassigned=int(w["rows_unassigned"]), processed="rows_processed" in w,
            )
        return Accounting(
            rows_in=int(w["operator_rows_in"]), rows_windowed=int(w["rows_windowed"]), rows_late=int(w["rows_late"]),
            rows_dead_lettered=int(w["operator_rows_dead_lettered"]), rows_unassigned=int(w["rows_unassigned"]),
            scope=operator_scope("rows_processed" in w), processed="rows_processed" in w,
        )

    def combined_watermarks(self, operator: str | None = None) -> list[int]:
        if operator is None:
            if len(self.watermark_history) != 1:
                raise ValueError(f"name one of the window operators: {sorted(self.watermark_history)}")
            operator = next(iter(self.watermark_history))
        return list(self.watermark_history[operator])
