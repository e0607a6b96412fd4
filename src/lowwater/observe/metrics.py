"""The metrics log: now :mod:`lowwater.metrics.log` (below the runtimes); re-exported here."""

from lowwater.metrics.log import (
    CUMULATIVE_GENERAL,
    CUMULATIVE_NATIVE,
    METRICS_FILE,
    CheckpointError,
    MetricsFollower,
    MetricsLog,
    batch_line,
    lines_from_records,
    read_checkpoint,
    record_batch,
)

__all__ = [
    "CUMULATIVE_GENERAL",
    "CUMULATIVE_NATIVE",
    "METRICS_FILE",
    "CheckpointError",
    "MetricsFollower",
    "MetricsLog",
    "batch_line",
    "lines_from_records",
    "read_checkpoint",
    "record_batch",
]
