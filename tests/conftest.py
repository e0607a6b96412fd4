"""Suite-wide checks.

Invariant accounting: every job any test runs to completion (reference runtime or Spark)
must account for every record it read: ``rows in = windowed + late + dead-lettered``
(+ unassigned), from its metrics. A test that breaks the balance fails at teardown.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lowwater.observe.accounting import Accounting
from lowwater.runtime.reference import ReferenceRuntime
from lowwater.runtime.result import JobResult


@pytest.fixture(autouse=True)
def every_record_is_accounted_for(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    results: list[Any] = []
    run_reference = ReferenceRuntime.execute

    def reference(self: ReferenceRuntime, *args: Any, **kwargs: Any) -> JobResult:
        result = run_reference(self, *args, **kwargs)
        results.append(result)
        return result

    monkeypatch.setattr(ReferenceRuntime, "execute", reference)
    try:  # only where the Spark extra is installed
        from lowwater.spark.engine import SparkRuntime
    except ImportError:
        SparkRuntime = None  # type: ignore[assignment,misc]
    if SparkRuntime is not None:
        run_spark = SparkRuntime.execute

        def spark(self: Any, *args: Any, **kwargs: Any) -> Any:
            job = run_spark(self, *args, **kwargs)
            # a bounded query has ended: account now (a scenario's checkpoint is then deleted);
            # a running one at teardown, over the batches it completed
            results.append(job.accounting() if self.trigger == "available_now" else job)
            return job

        monkeypatch.setattr(SparkRuntime, "execute", spark)
    yield results
    for result in results:
        if isinstance(result, JobResult) and len(result.watermark_history) != 1:
            continue  # no window operator, or several: nothing to balance job-wide
        accounting = result if isinstance(result, Accounting) else result.accounting()
        assert accounting.balanced, f"{getattr(result, 'job_name', 'spark job')}: {accounting}"
