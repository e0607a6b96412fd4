"""Suite-wide checks.

Invariant accounting: every job any test runs to completion (reference runtime or Spark)
must account for every record it read: ``rows in = windowed + late + dead-lettered``
(+ unassigned), from its metrics. A test that breaks the balance fails at teardown.

Spark drivers start faster with a class archive (:mod:`lowwater.spark.class_archive`): the
suite starts dozens of drivers (crash tests, CLI runs), so at its start it builds the archives
for the two class paths they use, in the background while the pure tests run, in
``jars/cds`` (``LOWWATER_JVM_ARCHIVE_DIR``; set it empty to go without). A driver started
before its archive is ready starts as usual.

``./dev test`` runs the suite on two pytest-xdist workers (``--dist loadgroup``), each with its
own SparkSession and its own servers (every server fixture is per worker, on free ports, in its
own temp dir). :func:`pytest_collection_modifyitems` keeps every test that uses the Kafka broker
or the HDFS cluster on one worker (one xdist group: those servers start once), and puts the
longest tests first, so that the two workers finish together.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from lowwater.observe.accounting import Accounting
from lowwater.runtime.reference import ReferenceRuntime
from lowwater.runtime.result import JobResult

# No per-example deadline: the property tests share two cores with the Spark tests on the other
# xdist worker, where a 200 ms deadline failed a correct example that took 257 ms
settings.register_profile("lowwater", deadline=None)
settings.load_profile("lowwater")

_archives: list[subprocess.Popen[bytes]] = []

SERVER_GROUP = "kafka-hdfs"
"""The xdist group of every test that uses the ``kafka`` or ``hdfs`` fixture (tests/spark/real/conftest.py)."""
_SERVER_FIXTURES = frozenset({"kafka", "hdfs"})

SLOW_FIRST = (
    "tests/spark/test_engine.py::test_killed_and_restarted_queries_equal_uninterrupted_runs",
    "tests/spark/test_faults.py::test_seeded_sigkills_then_a_restart_equal_an_uninterrupted_run",
    "tests/spark/test_several_sources.py::test_a_killed_and_restarted_union_of_two_sources",
    "tests/spark/test_cluster.py::",
    "tests/spark/real/test_delta_sink.py::",
    "tests/spark/test_demo.py::",
)
"""The longest tests outside the server group (1.5-3 min each on CI's 2 cores), run first in
this order: a worker that drew one of them last would finish minutes after the other."""


def pytest_configure(config: pytest.Config) -> None:
    if "LOWWATER_JVM_ARCHIVE_DIR" in os.environ:  # the caller's choice (empty: none)
        return
    try:
        from lowwater.spark.jvm import jars_dir, spark_jars
        from lowwater.spark.session import postgres_jdbc_jar
    except ImportError:  # no Spark extra
        return
    if not spark_jars():
        return
    folder = jars_dir() / "cds"
    folder.mkdir(exist_ok=True)
    os.environ["LOWWATER_JVM_ARCHIVE_DIR"] = str(folder)
    jar = postgres_jdbc_jar()
    # the crash jobs' and the CLI's class path first, then the test session's (with PostgreSQL's driver)
    code = ("import os; os.nice(5); from lowwater.spark.class_archive import build; build([]); "
            + (f"build([{jar!r}])" if jar else ""))
    with open(folder / "build.log", "ab") as log:
        _archives.append(subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=log,
                                          start_new_session=True))


@pytest.hookimpl(tryfirst=True)  # before xdist reads the group markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group(SERVER_GROUP))

    def rank(item: pytest.Item) -> int:
        return next((i for i, prefix in enumerate(SLOW_FIRST) if item.nodeid.startswith(prefix)), len(SLOW_FIRST))

    items.sort(key=rank)  # stable: the same order on every worker, the rest as collected


def pytest_unconfigure(config: pytest.Config) -> None:
    for proc in _archives:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            for partial in Path(os.environ["LOWWATER_JVM_ARCHIVE_DIR"]).glob("*.partial"):
                if not Path(f"/proc/{partial.suffixes[-2].lstrip('.')}").exists():  # name.jsa.<pid>.partial
                    partial.unlink(missing_ok=True)


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
            results.extend(_accounts(job) if self.trigger == "available_now" else [job])
            return job

        monkeypatch.setattr(SparkRuntime, "execute", spark)
    yield results
    for result in results:
        for accounting in [result] if isinstance(result, Accounting) else _accounts(result):
            assert accounting.balanced, f"{getattr(result, 'job_name', 'spark job')}: {accounting}"


def _accounts(job: Any) -> list[Accounting]:
    """Each window operator's account of a reference run or a Spark job (one for a job with one,
    none for a job with none)."""
    if isinstance(job, JobResult):
        return [job.accounting(name) for name in job.watermark_history]
    from lowwater.metrics.accounting import operator_names

    names = operator_names(job.metrics()) if job.path == "general" else []
    return [job.accounting(name) for name in names] if names else [job.accounting()]
