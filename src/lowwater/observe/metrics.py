"""The metrics log: now :mod:`lowwater.metrics.log` (below the runtimes); re-exported here."""

from lowwater.metrics.line import GENERAL_RUNNING_TOTALS, NATIVE_RUNNING_TOTALS, MetricsLine, running_totals
from lowwater.metrics.log import (
    METRICS_FILE,
    CheckpointError,
    MetricsFollower,
    MetricsLog,
    lines_from_records,
    read_checkpoint,
)

__all__ = [
    "GENERAL_RUNNING_TOTALS",
    "METRICS_FILE",
    "NATIVE_RUNNING_TOTALS",
    "CheckpointError",
    "MetricsFollower",
    "MetricsLine",
    "MetricsLog",
    "lines_from_records",
    "read_checkpoint",
    "running_totals",
]
