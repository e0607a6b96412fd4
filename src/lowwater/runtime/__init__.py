"""The reference runtime: lowwater's semantics, in-process, batch by batch."""

from lowwater.runtime.reference import ReferenceRuntime
from lowwater.runtime.result import BatchMetrics, JobResult

__all__ = ["BatchMetrics", "JobResult", "ReferenceRuntime"]
