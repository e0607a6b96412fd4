"""What a reference run returns: per-batch metrics and watermark histories."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["BatchMetrics", "JobResult"]


@dataclass(frozen=True)
class BatchMetrics:
    batch_id: int
    processing_time_ms: int
    rows_in: int
    end_of_input: bool
    windows: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per window operator: combined and per-partition watermarks, idle partitions,
    late rows (total and per partition), windows fired, open windows, state rows."""


@dataclass
class JobResult:
    job_name: str
    batches: list[BatchMetrics]
    watermark_history: dict[str, list[int]]
    """Per window operator, every combined watermark it received, in order."""

    def combined_watermarks(self, operator: str | None = None) -> list[int]:
        if operator is None:
            if len(self.watermark_history) != 1:
                raise ValueError(f"name one of the window operators: {sorted(self.watermark_history)}")
            operator = next(iter(self.watermark_history))
        return list(self.watermark_history[operator])
