"""The Spark engine: lowwater pipelines on Spark Structured Streaming.

One streaming query reads the source; ``foreachBatch`` hands each micro-batch to a
processor (native or general, :mod:`lowwater.spark.plan`), which returns the batch's
outputs and its new state. Per batch, in this order:

1. the clock for the batch is read once and recorded under the checkpoint (a replay
   reuses it, so idleness and time lag decide the same way);
2. the state after the previous batch is taken from memory, or loaded from the
   checkpoint after a restart or a replay;
3. the processor runs; its new state is committed as version ``batch_id``;
4. the sinks receive the batch's rows, idempotently per ``batch_id``; on the native path the
   batch's result rows, counted as they are written (``windows_fired``), are then added to the
   committed state (:meth:`StateStore.amend_json`).

Spark commits the batch only after ``foreachBatch`` returns, so a crash anywhere makes
Spark replay the same ``batch_id`` with the same input, and steps 1-4 give the same
state and the same output again: exactly-once. Nothing changes on a cluster but the
master URL and a checkpoint location on shared storage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from lowwater.core.clock import Clock, SystemClock
from lowwater.core.errors import (
    ConfigurationError,
    LowwaterError,
    PipelineError,
    QueryFailedError,
    UserFunctionError,
    said,
)
from lowwater.core.failures import hint_for, root_cause
from lowwater.graph import Pipeline, PipelineLike, as_pipeline
from lowwater.graph.field_check import check_composite_keys, check_field_names
from lowwater.graph.sinks import Sink, bind_job
from lowwater.metrics.line import MetricsLine, running_totals
from lowwater.metrics.log import FOLD_EVERY, KEEP_LINES, MetricsLog
from lowwater.metrics.log import through as metrics_through
from lowwater.metrics.names import PartitionNames, named_partitions
from lowwater.spark import faults
from lowwater.spark.fs import checkpoint_fs, is_uri, join, resolve
from lowwater.spark.general import GeneralProcessor, find_sources, read_sources
from lowwater.spark.keyed import KeyedPlan, KeyedProcessor, keyed_plan
from lowwater.spark.lease import CheckpointLease
from lowwater.spark.native import NativeProcessor
from lowwater.spark.outputs import BatchOutput, Output, dead_letter_output
from lowwater.spark.plan import native_plan
from lowwater.spark.processor import BatchResult, JsonStateProcessor, Processor
from lowwater.spark.session import share_generated_classes
from lowwater.spark.sinks.base import DataFrameSink
from lowwater.spark.sinks.delta import DeltaSink, check_new_job
from lowwater.spark.sinks.files import DirectorySink
from lowwater.spark.sinks.postgres import check_jobs as check_postgres_jobs
from lowwater.spark.state import KEEP_BATCH_RECORDS, StateStore
from lowwater.spark.window_store import WindowStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from lowwater.metrics.accounting import Accounting

__all__ = ["SparkJob", "SparkRuntime", "query_name"]

_T = TypeVar("_T")

log = logging.getLogger("lowwater.spark")
PathChoice = Literal["auto", "native", "executor", "keyed", "general"]


@contextmanager
def signals_caught(signums: Sequence[int], received: list[int],
                   event: threading.Event | None = None) -> Iterator[None]:
    """While inside, each of ``signums`` is only recorded in ``received`` (and sets ``event``); the
    handlers found are put back on the way out. A stop is then the waiting loop's to make
    (:func:`wait_for`): PySpark's SIGINT handler calls into the JVM from inside the py4j call the
    main thread waits in, which breaks its connection and prints tracebacks, and Python's default
    SIGTERM ends the process under the running query."""

    setting: list[bool] = []

    def record(signum: int, frame: Any) -> None:
        received.append(signum)
        # the event is set once: a second signal can come while the first one's handler is inside
        # event.set(), holding the event's lock (Ctrl-C pressed twice; `timeout` signals the process,
        # then its group), and setting it there again waited for that lock, the main thread's own,
        # forever: the run went on, deaf to every later signal (SIGTERM too)
        if event is not None and not setting:
            setting.append(True)
            event.set()

    setattr(record, _STOP_HANDLER, True)
    previous = {signum: signal.signal(signum, record) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


_STOP_HANDLER = "_lowwater_stop_handler"
"""Marks a handler :func:`signals_caught` installed: a run under it leaves the signals to it."""


def _check_query_name(spark: SparkSession, job_name: str) -> None:
    """Refuse a job whose query name (:func:`query_name`) a query running in the session has, before
    the checkpoint is claimed: Spark refused it at ``start()`` with an ``IllegalArgumentException``
    about a name the user had not given (two unnamed jobs share the default's), or two names that
    differ only in punctuation (a user probe, session 59)."""
    name = query_name(job_name)
    if any(q.name == name for q in spark.streams.active):
        as_given = "" if name == job_name else f" (what job_name {job_name!r} becomes)"
        raise ConfigurationError(
            "job_name", f"a streaming query named {name!r}{as_given} is running in this SparkSession already: give "
            "each job that runs at the same time a job_name of its own (runtime.execute(env, job_name=...)), or stop "
            "the other one first (job.stop(), or its query in spark.streams.active)")


def wait_for(query: StreamingQuery, stop: Callable[[], bool], timeout_s: float | None = None) -> bool:
    """Wait until ``query`` ends (``True``), ``stop()`` holds or ``timeout_s`` passes (``False``), a
    second at a time, so that a signal recorded by :func:`signals_caught` is seen within one."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not stop():
        if deadline is not None and time.monotonic() >= deadline:
            return False
        if query.awaitTermination(1):
            return True
    return False


def _awaited(wait: Callable[[], _T]) -> _T:
    """``wait()``, a wait on a query, with the query's failure (a ``StreamingQueryException``, or
    py4j's error when the JVM is gone) raised as a :class:`QueryFailedError`."""
    try:
        return wait()
    except LowwaterError:
        raise
    except Exception as e:
        hint = hint_for(e)
        raise QueryFailedError(f"the streaming query failed: {root_cause(e)}" + (f"; hint: {hint}" if hint else ""),
                               e) from None


def _between_batches(query: StreamingQuery, timeout_s: float) -> None:
    """Return once ``query`` runs no micro-batch (or has ended), or after ``timeout_s``. A trigger
    can start right after, which the stop then interrupts; between batches is where a live job
    spends its quiet periods, and where a batch that outlasts its trigger still ends."""
    deadline = time.monotonic() + timeout_s
    try:
        while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.02)
    except Exception as e:  # the JVM gone (a SIGTERM to the process group): the stop says what it can
        log.debug("could not read the query's status before stopping it: %s", e)


@dataclass
class SparkJob:
    """A running (or finished) lowwater query on Spark."""

    query: StreamingQuery | None
    store: StateStore
    path: str
    reason: str
    history: list[int] = field(default_factory=list)
    lease: CheckpointLease | None = None
    """This run's hold on its checkpoint (:mod:`.lease`), released when the query ends."""

    def await_termination(self, timeout_s: float | None = None) -> bool | None:
        """Wait until the query ends (or ``timeout_s`` passes: then ``False``), and raise its failure
        (a :class:`QueryFailedError`, as :meth:`SparkRuntime.execute` raises it for ``available_now``).

        Ctrl-C (SIGINT) while waiting in the main thread stops the query first, then raises
        ``KeyboardInterrupt``; SIGTERM (where no handler of the program's own is set) stops it,
        then raises ``SystemExit(143)``. PySpark's own SIGINT handler ran inside the py4j call
        the thread waited in, broke its connection, and printed about 150 lines of tracebacks;
        SIGTERM ended the process under the running query. A batch cut short is run again by
        the next start, as after any stop."""
        if self.query is None:
            return True
        ended: bool | None = False
        try:
            ended = self._awaited(timeout_s)
        except BaseException:  # failed or stopped: the query is over
            ended = True
            raise
        finally:
            if ended is not False and self.lease is not None:
                self.lease.release()
        return ended

    def _awaited(self, timeout_s: float | None) -> bool | None:
        assert self.query is not None
        query = self.query
        if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
            return _awaited(lambda: query.awaitTermination(None if timeout_s is None else int(timeout_s)))
        received: list[int] = []
        taken = [signal.SIGINT] + ([signal.SIGTERM] if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL else [])
        with signals_caught(taken, received):
            if _awaited(lambda: wait_for(query, lambda: bool(received), timeout_s)):
                return True
            if not received:
                return False
        self.query.stop()
        if received[0] == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + received[0])

    def stop(self, wait_s: float = 10.0) -> None:
        """Stop the query between two micro-batches, and release the checkpoint's lease.

        A batch in progress is given up to ``wait_s`` seconds to end first; past that (or with
        ``wait_s=0``) Spark's stop interrupts it, and the next start runs it again. Stopped at once,
        a live job nearly always cut a batch short, and its Spark tasks each logged the cancellation
        (``FileFormatWriter: Aborting job``, ``InterruptedException``) with its stack: nothing was
        lost, but a normal stop read like a failure (a user probe, session 64)."""
        try:
            if self.query is not None:
                if wait_s > 0:
                    _between_batches(self.query, wait_s)
                self.query.stop()
        finally:  # also where the stop raised: a SIGTERM to the process group ended Spark's JVM first
            if self.lease is not None:
                self.lease.release()

    def batches(self) -> list[dict[str, Any]]:
        """Per-batch metrics, from the checkpoint's batch log."""
        return [r for r in self.store.batch_records() if "metrics" in r]

    def watermarks(self) -> list[dict[str, Any]]:
        """Per batch: the combined watermark, per-partition watermarks and idle partitions."""
        return [
            {"batch_id": r["batch_id"], "processing_time_ms": r["clock_ms"],
             **{k: r["metrics"].get(k) for k in ("combined_watermark", "partition_watermarks", "idle_partitions")}}
            for r in self.batches()
        ]

    def metrics(self) -> list[dict[str, Any]]:
        """One metrics line per batch, from ``<checkpoint>/lowwater/metrics.jsonl``
        (see :mod:`lowwater.metrics.log` for the fields; a replayed batch's last line wins)."""
        from lowwater.metrics.log import lines_from_records, read_checkpoint

        if not self.store.local:  # no append on object stores: the batch records hold the lines
            return lines_from_records(self.store.batch_records(), self.path)
        return read_checkpoint(self.store.root.parent)

    def accounting(self, operator: str | None = None) -> Accounting:
        """Where every record read so far went (``rows in = windowed + late + dead-lettered``);
        ``.balanced`` is the invariant. On the native paths the totals are read from the last
        committed state (the same file, written in the same step, as the state itself), so a
        metrics line that failed to append cannot make it look balanced; on the general path
        from the metrics log. A job with several window operators (the general path) names the
        one whose account it wants, ``operator``, as :meth:`JobResult.accounting
        <lowwater.runtime.result.JobResult.accounting>` does (until session 46 it got the first
        one's without a word)."""
        from lowwater.metrics.accounting import Accounting, from_lines, operator_lines, operator_names, operator_scope

        if self.path == "general":
            lines = self.metrics()
            names = operator_names(lines)
            if operator is None and len(names) > 1:
                raise ValueError(f"name one of the window operators: {names}")
            if operator is not None and operator not in names:
                raise ValueError(f"no window operator {operator!r} among several: {names or 'the job has one'}")
            return from_lines(lines if operator is None else operator_lines(lines, operator))
        if operator is not None:
            raise ValueError(f"no window operator {operator!r} among several: the job has one")
        version = self.store.latest_version()
        if version is None:
            return Accounting(0, 0, 0, 0)
        t = self.store.load_json(version)["totals"]
        if self.path == "keyed" and not t.get("direct", 1):  # a map/filter/flat_map before the window
            return Accounting(int(t.get("op_rows_in", 0)), int(t.get("rows_windowed", 0)),
                              int(t.get("rows_late", 0)), int(t.get("op_dead", 0)),
                              int(t.get("rows_unassigned", 0)), scope=operator_scope(bool(t.get("process"))),
                              processed=bool(t.get("process")))
        return Accounting(int(t.get("rows_in", 0)), int(t.get("rows_windowed", 0)), int(t.get("rows_late", 0)),
                          int(t.get("rows_dead", 0)), int(t.get("rows_unassigned", 0)),
                          processed=bool(t.get("process")))

    def progress(self) -> list[dict[str, Any]]:
        """Spark's recent ``StreamingQueryProgress`` per batch, each with lowwater's metrics line
        for the same batch id: ``{"batch_id", "spark": {...}, "lowwater": {...} | None}``."""
        from lowwater.spark.listener import progress_fields

        if self.query is None:
            return []
        lines = {m.get("spark_batch_id", m["batch_id"]): m for m in self.metrics()}
        return [{"batch_id": p.batchId, "spark": progress_fields(p), "lowwater": lines.get(p.batchId)}
                for p in self.query.recentProgress]


class SparkRuntime:
    """Runs a pipeline on Spark Structured Streaming.

    Parameters
    ----------
    checkpoint_location:
        Spark's checkpoint and lowwater's versioned state (``<location>/lowwater``). A path
        without a scheme is on the session's default file system, as Spark's own paths are: a
        local directory under Spark's default, ``hdfs://<namenode>/<path>`` on a cluster whose
        ``fs.defaultFS`` is HDFS (:func:`lowwater.spark.fs.resolve`).
    spark:
        The session; :func:`lowwater.spark.session.get_or_create_session` by default.
    path:
        ``auto`` picks the native path when the pipeline allows it (see :mod:`.plan`), else the
        keyed path (one keyed operator of any kind, run per key on the executors, see
        :mod:`.keyed`), else the general path (the reference operators on the driver);
        ``executor`` forces timestamps and watermarks through Python on the executors. A path
        named (``native``, ``executor``, ``keyed``, ``general``) is run or refused, saying why:
        ``native`` refuses Python timestamps or watermarks, which the executor path runs.
    trigger:
        ``"available_now"`` processes what the source holds, then stops; a rerun resumes
        where it stopped, so a series of runs over a growing input equals one continuous
        run. An interval such as ``"1 second"`` runs until stopped, emitting watermarks on
        every interval even with no data.
    clock:
        Processing time for idleness and time lag; a Clock, or a function of the batch id.
    end_of_input:
        Off by default. With ``available_now``, ``True`` declares the input complete: after
        the last batch, a MAX watermark fires every window that is still open. This is
        final for the checkpoint: records read by a later run are late for every window
        (late output, counted), as in Flink after a bounded source ends.
    dead_letter_sink:
        Receives records that cannot be processed (unparseable, or no timestamp, key or value),
        each as ``{"reason", "partition", "offset", "record"}``, on every path; they are always
        counted in the metrics (``rows_dead_lettered``).
    on_metrics:
        Called on the driver with each batch's metrics line (the JSON object a line of
        ``lowwater status`` comes from: watermarks, idle partitions, counts, duration) once the
        batch is committed and its sinks have run, whatever the checkpoint's file system. A
        replayed batch reports again. An exception it raises is logged, and the job goes on.
    """

    def __init__(
        self, checkpoint_location: str, *, spark: SparkSession | None = None, path: PathChoice = "auto",
        trigger: str = "available_now", clock: Clock | Callable[[int], int] | None = None,
        end_of_input: bool = False, snapshot_every: int = 20, dead_letter_sink: Sink | None = None,
        on_metrics: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.checkpoint = str(checkpoint_location)
        self.spark = spark
        if path not in ("auto", "native", "executor", "keyed", "general"):
            raise ConfigurationError("path", f"must be auto, native, executor, keyed or general, got {path!r}")
        self.path = path
        if trigger != "available_now":
            from lowwater.core.time import to_millis

            if to_millis(trigger, name="trigger") <= 0:
                raise ConfigurationError("trigger", f"the interval must be > 0 ms, got {trigger!r}")
        self.trigger = trigger
        if clock is not None and not callable(clock) and not hasattr(clock, "now_ms"):
            raise ConfigurationError("clock", f"expected a Clock or a function of the batch id, got {clock!r}")
        self.clock = clock or SystemClock()
        self._clock_given = clock is not None
        self._sources_clock: Callable[[int], int] | None = None
        """The sources' own processing times, for the pipeline being run (:meth:`execute`)."""
        if not isinstance(end_of_input, bool):
            raise ConfigurationError("end_of_input", f"must be True or False, got {end_of_input!r}")
        if end_of_input and trigger != "available_now":  # an interval's query runs until stopped: no last batch
            raise ConfigurationError(
                "end_of_input", f"declares the input complete after the last batch of an available_now run; "
                f"with trigger={trigger!r} the query runs until it is stopped, so it would do nothing. Hint: "
                "trigger='available_now' with end_of_input=True, or no end_of_input")
        self.end_of_input = end_of_input
        if isinstance(snapshot_every, bool) or not isinstance(snapshot_every, int) or snapshot_every < 1:
            raise ConfigurationError("snapshot_every", f"must be an int >= 1 (batches), got {snapshot_every!r}")
        self.snapshot_every = snapshot_every
        if dead_letter_sink is not None and not isinstance(dead_letter_sink, Sink):
            raise ConfigurationError("dead_letter_sink",
                                     f"expected a lowwater Sink, got {type(dead_letter_sink).__name__}")
        self.dead_letter_sink = dead_letter_sink
        if on_metrics is not None and not callable(on_metrics):
            raise ConfigurationError("on_metrics", f"expected a function of a metrics line, got {on_metrics!r}")
        self.on_metrics = on_metrics
        self.stop_requested = threading.Event()
        """Set it (from another thread, or from a signal handler: once, as :func:`signals_caught`
        does, since a second signal can interrupt the first ``set`` while it holds the event's lock)
        to stop an ``available_now`` run after the batch in progress; the checkpoint keeps everything
        up to there, and a rerun resumes."""

    def _now(self, batch_id: int) -> int:
        if self._sources_clock is not None:
            return self._sources_clock(batch_id)
        if callable(self.clock) and not hasattr(self.clock, "now_ms"):
            return int(self.clock(batch_id))
        return int(self.clock.now_ms())

    def execute(self, pipeline: PipelineLike, job_name: str = "lowwater job") -> SparkJob:
        """Run ``pipeline`` (a :class:`~lowwater.graph.Pipeline`, or an environment, which makes one)."""
        from lowwater.spark.session import get_or_create_session

        p = as_pipeline(pipeline)  # the graph's one walk: everything below reads p.walk()
        spark = self.spark or get_or_create_session()
        if getattr(spark, "_jvm", None) is None:  # before the checkpoint is claimed
            raise ConfigurationError(
                "spark", "a Spark Connect session (SparkSession.builder.remote(...)) cannot run a lowwater job: each "
                "micro-batch is run by lowwater in this driver process (its watermarks, state and sinks), which "
                "Spark Connect's foreachBatch runs elsewhere, on its server. Use a classic session "
                "(SparkSession.builder.master(...), or lowwater.spark.session.get_or_create_session())")
        sources = find_sources(p)
        times = [t for t in (getattr(s, "processing_times", lambda: None)() for s in sources) if t]
        # the sources' own clock, as the reference runtime reads it (this pipeline's, not a runtime's for good)
        self._sources_clock = _clock_of(times) if times and not self._clock_given else None
        check_field_names(p)  # before Spark starts and before the checkpoint is claimed
        p.check_dead_letter_sink(self.dead_letter_sink)
        plan, reason = native_plan(p)
        if self.path in ("native", "executor") and plan is None:
            which = "the native path" if self.path == "native" else \
                "the executor path (the native path's windows, watermarks on the executors)"
            raise PipelineError(f"this pipeline cannot take {which}: {reason}. Hint: path='auto' (the default) "
                                "takes the path that runs it")
        if self.path == "native" and plan is not None and plan.executor_watermarks:  # ran the executor path
            raise PipelineError(
                "this pipeline cannot take the native path: its timestamps or watermarks come from Python (a "
                "timestamp assigner function or class, ingestion time, a punctuated or custom generator), which the "
                "native path's SQL cannot run; the executor path runs them on the executors. Hint: "
                "path='executor', or path='auto' (the default), which takes it")
        if self.path == "executor" and plan is not None:  # Python watermarks on the executors, even if built in
            plan, reason = dataclasses.replace(plan, executor_watermarks=True), "native, watermarks on the executors"
        checkpoint = resolve(self.checkpoint, spark)  # where Spark puts its own checkpoint and the window store
        store = StateStore(checkpoint, snapshot_every=self.snapshot_every, spark=spark)
        processor: Processor
        keyed: KeyedPlan | None = None
        if plan is not None and self.path not in ("general", "keyed"):
            processor, path = NativeProcessor(plan), "executor" if plan.executor_watermarks else "native"
        else:
            why = "general path requested"
            if self.path in ("auto", "keyed"):
                keyed, why = keyed_plan(p)
                if keyed is None and self.path == "keyed":
                    raise PipelineError(f"this pipeline cannot take the keyed path: {why}")
            if keyed is not None and self.path == "auto" and store.recorded_path() == "general":
                # written before the keyed path took such a pipeline (count and processing-time
                # windows until session 53): the general path resumes its own state
                keyed, why = None, "its checkpoint was written on the general path"
            if plan is not None:
                reason = f"{self.path} path requested"
            elif keyed is not None:
                reason = f"not native ({reason}): per key on the executors"
            else:
                reason = f"not native ({reason}), not keyed ({why})"
            processor, path = GeneralProcessor(p, sources, spark), "keyed" if keyed is not None else "general"
        if path == "general":
            store.snapshot_every = 1
        if path in ("keyed", "general"):
            check_composite_keys(p, path)
        if path != "general":  # the other paths' executors write and read under the checkpoint
            _check_executors_share(spark, checkpoint, store.fs, "checkpoint",
                                   f"on the {path} path Spark's executors write under it for this driver to read")
        for sink in {id(s): s for s in [*(t.sink for t in p.sinks), self.dead_letter_sink]}.values():
            where = (getattr(sink, "location", None) or getattr(sink, "path", None)) \
                if isinstance(sink, (DirectorySink, DeltaSink)) else None
            if where is not None:  # Spark's executors write its files, which the driver then renames or lists
                located = resolve(str(where), spark)
                _check_executors_share(spark, located, checkpoint_fs(located, spark), "path",
                                       f"Spark's executors write the files of {sink!r} there")
        _check_query_name(spark, job_name)
        # one run at a time on a checkpoint (lease.py): taken before the checkpoint is written to
        lease = CheckpointLease(store.fs, store.location, checkpoint)
        lease.acquire()
        job = SparkJob(None, store, path, reason, lease=lease)
        lease.hold(lambda: job.query is None or bool(job.query.isActive))
        try:
            self._start(p, spark, sources, processor, keyed, path, checkpoint, store, job, job_name)
        except BaseException:
            lease.release()
            raise
        if self.trigger == "available_now":
            lease.release()
        return job

    def _start(self, p: Pipeline, spark: SparkSession, sources: list[Any], processor: Processor,
               keyed: KeyedPlan | None, path: str, checkpoint: str, store: StateStore, job: SparkJob,
               job_name: str) -> None:
        """:meth:`execute` once this run holds the checkpoint's lease: bind the checkpoint and the
        sinks, start the query, and for ``available_now`` run it to its end."""
        store.claim({"path": path, **p.fingerprint()})
        store.bind_sources(sources)  # a Kafka topic deleted and made again under its name is refused
        sinks = [*(t.sink for t in p.sinks), self.dead_letter_sink]
        bind_job(sinks, store.job_id())
        resumes = store.latest_version() is not None
        if resumes:  # Spark's half of the checkpoint, gone or behind, would read the sources again
            _check_spark_half(store, join(checkpoint, "spark"))
        if not resumes:  # a new job: a Delta table another job appends to is refused
            check_new_job(sinks)
        for sink in sinks:  # what would fail its first write (a JDBC driver missing), before the query starts
            check = getattr(sink, "check_before_run", None)
            if callable(check):
                check()
        # a PostgreSQL table another job's rows are in, or gone while this job resumes, is refused
        check_postgres_jobs(sinks, resumes)
        if isinstance(processor, NativeProcessor):
            processor.bind(WindowStore(join(store.location, "windows"), store.fs))
        if keyed is not None:
            processor = KeyedProcessor(keyed, store.fs, store.location, store.key, compact_every=self.snapshot_every,
                                       sinks=[t.sink for t in p.sinks])
        labels = p.source_labels()
        names = PartitionNames.of([(labels.get(t.id, t.name), t.source) for t in p.sources])
        driver = _BatchDriver(processor, store, [t.sink for t in p.sinks], self.dead_letter_sink, self._now, job, spark,
                              self.on_metrics, several_sources=len(sources) > 1,
                              partition_names=names, sources=sources)
        log.info("lowwater %s: %s path (%s)", job_name, path, job.reason)
        latest = store.latest_version()
        if latest is not None and isinstance(processor, JsonStateProcessor):  # a state this version cannot
            processor.state_from_json(store.load_json(latest))  # read (another format) is refused before a batch
        share_generated_classes(spark)  # before the query starts: its session is a copy of this one
        stream = read_sources(spark, sources, [labels.get(t.id, t.name) for t in p.sources])
        if isinstance(processor, KeyedProcessor):  # what its batches' frames hold, for the steps without one
            processor.input_schema = stream.schema
        driver.ticks_alone = not _keeps_state(stream)
        driver.complete_end_of_input()  # an end-of-input step a crash interrupted comes first

        if store.local:  # (a URI checkpoint: Spark's own assertion remains)
            _check_source_count(Path(checkpoint) / "spark", len(sources) + 1)
        stream = _with_ticks(spark, stream)  # on every trigger, so their checkpoints are interchangeable
        writer = stream.writeStream.foreachBatch(driver.on_batch).option(
            "checkpointLocation", join(checkpoint, "spark")
        ).queryName(query_name(job_name))
        if self.trigger == "available_now":
            writer = writer.trigger(availableNow=True)
            query = writer.start()
            job.query = query
            # poll, so that a stop request (Ctrl-C in the CLI) is seen between py4j calls; in a script or
            # a notebook, Ctrl-C (SIGINT) stops the query, then raises KeyboardInterrupt, as in
            # SparkJob.await_termination: it raised inside a py4j call and left the query running
            # without its lease (a user probe, session 59). The CLI's own handler (_STOP_HANDLER) stays.
            received: list[int] = []
            caught = threading.current_thread() is threading.main_thread() and \
                not getattr(signal.getsignal(signal.SIGINT), _STOP_HANDLER, False)
            with signals_caught([signal.SIGINT], received) if caught else contextlib.nullcontext():
                finished = _awaited(lambda: wait_for(query, lambda: self.stop_requested.is_set() or bool(received)))
            if not finished:
                query.stop()
                if received:
                    raise KeyboardInterrupt
                return
            if self.end_of_input and not self.stop_requested.is_set():
                driver.finish()
        else:
            from lowwater.core.time import to_millis

            interval = to_millis(self.trigger, name="trigger")
            job.query = writer.trigger(processingTime=f"{interval} milliseconds").start()


def _check_executors_share(spark: SparkSession, location: str, fs: Any, parameter: str, writes: str) -> None:
    """Refuse a ``location`` on the local file system that the executors of a cluster's master do not
    share with this driver (a local directory of one machine, not a mount every node has): the
    checkpoint, or a file sink's directory. ``writes`` says what the executors write there.

    On the native and keyed paths the executors write window contents and keyed state under the
    checkpoint, and the driver lists and reads them; a ``DirectorySink``'s executors write a batch
    that the driver then renames. Written to another machine's disk, the driver found nothing: the
    keyed path went on without its state and gave wrong results that balanced, the native path
    failed with Spark's ``PATH_NOT_FOUND``, and a sink's batches held no rows (a user probe, session
    61). So on a master that is not local, each core writes a file under ``location`` (in a hidden
    directory, deleted after), and the driver must see every one; a Spark job before the first batch,
    for a location on the local file system only."""
    master = str(spark.sparkContext.master)
    if master.startswith("local") or (is_uri(location) and not location.startswith("file:")):
        return
    tasks = max(1, int(spark.sparkContext.defaultParallelism))
    probe = join(location, f"_lowwater_shared_{uuid.uuid4().hex}")
    existed = fs.exists(location)
    try:
        spark.range(tasks, numPartitions=tasks).selectExpr("CAST(id AS STRING) AS value").write.text(probe)
        seen = sum(1 for name in fs.names(probe) if name.startswith("part-"))
    finally:
        fs.delete(probe if existed else location)  # as found: a new Delta table's directory is not there
    if seen < tasks:
        raise ConfigurationError(
            parameter, f"{location!r} is on the local file system, and {writes}: of {tasks} files the executors "
            f"of {master} wrote there, this driver sees {seen}; the others are on other machines' disks. Put it "
            "on a file system every node shares: an hdfs: or s3a: URI, or a directory mounted at the same path "
            "on every node (docs/cluster.md)")


def _with_ticks(spark: SparkSession, stream: DataFrame) -> DataFrame:
    """Make Spark run a batch every trigger interval even with no data, with a source that
    has one row per micro-batch: periodic emission then lets time-lag watermarks advance and
    idle partitions be detected.

    The ticks are a source of the query, united with the data under a filter that is always
    false: Spark's offsets and batches count the tick source, its one row per batch is
    dropped where it is read, and the data's rows reach ``foreachBatch`` as the sources give
    them. Ticks marked by a ``_tick`` column and filtered out of the batch in ``foreachBatch``
    put that column on every row and two more DataFrame operations in every batch's plan.

    The tick source is part of the query on every trigger, so a checkpoint written with an
    interval trigger can be resumed with ``available_now`` (to drain it, or to finish a
    backfill) and the other way round: Spark refuses a checkpoint whose number of sources
    differs. Under ``available_now`` the tick source has one row per run: it joins the
    first batch, or, when no data arrived since the last run, makes one empty batch, a
    periodic emission at the run's processing time."""
    from pyspark.sql import functions as F

    ticks = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 1).load()
    cols = [F.lit(None).cast(f.dataType).alias(f.name) for f in stream.schema.fields]
    return stream.unionByName(ticks.select(*cols).where(F.lit(False)))


_STATEFUL = frozenset({"Aggregate", "Deduplicate", "DeduplicateWithinWatermark", "FlatMapGroupsWithState",
                       "FlatMapGroupsInPandasWithState", "TransformWithState", "TransformWithStateInPySpark",
                       "Join", "Window", "GlobalLimit", "LocalLimit", "Sort", "Expand"})
"""Logical operators that may keep state in a streaming query, some of which emit rows in a batch that
read nothing (an aggregation's windows that Spark's watermark closes, an outer join's unmatched rows,
a state's timeouts); a few stateless ones (``Expand``, ``Sort``) are named too, to stay on the safe side."""


def _keeps_state(stream: DataFrame) -> bool:
    """Whether the sources' stream (a ``DataFrameSource``'s is the user's) has an operator that may keep
    Spark state (:data:`_STATEFUL`): then a batch that read nothing may still hold rows. True when
    its plan cannot be looked at (Spark Connect, another Spark)."""
    try:
        todo = [stream._jdf.queryExecution().analyzed()]
        while todo:
            node = todo.pop()
            if str(node.nodeName()) in _STATEFUL:
                return True
            children = node.children()
            todo += [children.apply(i) for i in range(children.size())]
        return False
    except Exception:
        return True


def _read_nothing(query: Any, spark_batch_id: int) -> bool:
    """Whether Spark's micro-batch ``spark_batch_id`` read nothing from the pipeline's sources: a
    batch the tick source (:func:`_with_ticks`) made alone, a run of ``available_now`` with no new
    records or a trigger with none. The processors run it as a batch without rows (``df`` None):
    the periodic emission and what it fires, with none of the jobs that read a batch's rows. Over
    no rows those jobs found nothing, but their code was compiled cold in a rerun's one batch (1.9 s
    of its 2.7 s, session 63) and they ran at every quiet trigger of a live stream.

    From the offsets Spark's own micro-batch runs on (its ``MicroBatchExecutionContext``): each
    source but the last, the ticks, ends where it started, which is how Spark itself picks the
    sources whose data a batch reads (a stream that keeps Spark state is never asked:
    :func:`_keeps_state`). Internal to Spark's JVM: anything else (another Spark, a
    query not yet known, a batch that is not the latest) says False, and the batch runs as one
    with rows."""
    if query is None:
        return False
    try:
        execution = query._jsq.streamingQuery()
        context = execution.latestExecutionContext()
        if int(context.batchId()) != spark_batch_id:
            return False
        sources = execution.sources()
        n = int(sources.size())
        if n < 2 or "RatePerMicroBatch" not in sources.apply(n - 1).getClass().getName():
            return False
        start, end = context.startOffsets(), context.endOffsets()
        for i in range(n - 1):
            first, last = start.get(sources.apply(i)), end.get(sources.apply(i))
            if first.isEmpty() or last.isEmpty() or not first.get().equals(last.get()):
                return False
        return True
    except Exception as e:  # py4j: a Spark without these calls
        log.debug("cannot read the micro-batch's offsets (%s): running it as a batch with rows", e)
        return False


def _check_spark_half(store: StateStore, spark_checkpoint: str) -> None:
    """Refuse a checkpoint whose lowwater state is after Spark micro-batches whose offsets Spark's
    own checkpoint no longer has: ``<checkpoint>/spark`` deleted, or restored from an older copy
    than ``<checkpoint>/lowwater``. Spark writes a batch's offsets before ``foreachBatch`` runs it,
    so a whole checkpoint always has them. Without them Spark started its query over from the
    sources' start as its batch 0, which lowwater took for a replay of its own batch 0: every
    record was read and windowed again on top of the state, the sinks' newer batches stayed, and
    the accounting counted each record twice as balanced (a user probe, session 59)."""
    latest = store.latest_version()
    record = store.batch_record(latest) if latest is not None else None
    if record is not None and record.get("spark_batch_id") is None and latest:  # an end-of-input step
        record = store.batch_record(latest - 1)
    if record is None or record.get("spark_batch_id") is None:
        return
    ran = int(record["spark_batch_id"])
    offsets = [int(n) for n in store.fs.names(join(spark_checkpoint, "offsets")) if n.isdigit()]
    # one entry short is a crash between Spark's planning of the batch and its offsets reaching the disk
    # (a power loss): Spark plans that batch again from the one before, which lowwater replays
    # (tests/spark/test_log_source.py); more is another copy's, and none at all a new query's
    if not offsets or max(offsets) < ran - 1:
        has = f"ends at batch {max(offsets)}" if offsets else "is missing"
        raise ConfigurationError(
            "checkpoint_location",
            f"{spark_checkpoint.rsplit('/', 1)[0]} is incomplete: lowwater's state is after Spark's micro-batch "
            f"{ran}, and Spark's offsets log ({join(spark_checkpoint, 'offsets')}) {has}, so Spark would read the "
            "sources again from where that log ends, on top of the state. Restore the checkpoint whole (both "
            "its spark/ and lowwater/ directories, from one copy), or start over with a new checkpoint location")


def _check_source_count(spark_checkpoint: Path, expected: int) -> None:
    """Refuse, before Spark does with an assertion, a checkpoint whose query had another number
    of sources: one written before the tick source was part of every query."""
    offsets = spark_checkpoint / "offsets"
    if not offsets.is_dir():
        return
    ids = sorted(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    if not ids:
        return
    lines = (offsets / str(ids[-1])).read_text().splitlines()
    sources = len(lines) - 2  # "v1", the batch metadata, then one line per source
    if sources != expected:
        raise ConfigurationError(
            "checkpoint_location",
            f"{spark_checkpoint.parent} was written by a query with {sources} source(s), and lowwater's query "
            f"now has {expected} (its sources and the tick source, on every trigger); Spark cannot resume it. "
            "Finish it with the lowwater version that wrote it, or start over with a new checkpoint location")


def query_name(job_name: str) -> str:
    """The streaming query's name for a job: its letters and digits, other characters as ``_``,
    at most 60 (``lowwater`` for an empty name); the CLI's progress listener picks the query by it."""
    return "".join(c if c.isalnum() else "_" for c in job_name)[:60] or "lowwater"


class _BatchDriver:
    """What ``foreachBatch`` calls: clock, state, processor, commit, sinks."""

    def __init__(self, processor: Processor, store: StateStore, sinks: list[Sink], dead_letter_sink: Sink | None,
                 now: Callable[[int], int], job: SparkJob, spark: SparkSession,
                 on_metrics: Callable[[dict[str, Any]], None] | None = None, several_sources: bool = False,
                 partition_names: PartitionNames | None = None, sources: Sequence[Any] = ()) -> None:
        self.processor = processor
        self.sources = sources
        """The pipeline's sources, whose identity each data batch checks (:meth:`StateStore.check_sources`)."""
        self.partition_names = partition_names
        """How the metrics name partitions (:mod:`lowwater.metrics.names`), or ``None``: by their numbers."""
        self.several_sources = several_sources
        """Whether dead letters name their source: a ``source`` column in every batch's frame, empty or not."""
        self.on_metrics = on_metrics
        self.store = store
        self.sinks = sinks
        """The pipeline's sinks, in its order: every path's output has one payload per sink (``per_sink``)."""
        self.dead_letter_sink = dead_letter_sink
        self.now = now
        self.job = job
        self.spark = spark
        self.cached: tuple[int, Any] | None = None
        self.last_batch = -1
        self.opened: set[int] = set()
        self._through: dict[int, dict[str, Any]] = {}
        """The last batch's ``"through"`` (a batch record's fold of every batch through it), by its id."""
        self.ticks_alone = False
        """Whether a batch that read nothing from the sources (:func:`_read_nothing`) holds no rows: the
        sources' stream keeps no state of Spark's (:func:`_keeps_state`), which could emit rows in it."""

    def _state_after(self, version: int) -> Any:
        if self.cached is not None and self.cached[0] == version:
            return self.cached[1]
        processor = self.processor
        if version < 0:
            return processor.empty_state()
        if isinstance(processor, JsonStateProcessor):  # native and keyed: the control plane as JSON
            return processor.state_from_json(self.store.load_json(version))
        state = self.store.load(version, processor.empty_state, processor.apply_delta)
        return processor.rebind(state)  # the checkpoint's data, the current code

    def step_of(self, spark_batch_id: int) -> int:
        """lowwater's step id for Spark's micro-batch ``spark_batch_id``.

        Steps are Spark's batch ids, except that the end-of-input step ``E`` (if any) takes a
        step of its own: Spark's batch ``b >= E`` is step ``b + 1``. State versions, batch
        records, metrics lines and sink batches are all keyed by step id, so a run after the
        end of input never rewrites the end-of-input step's output (or the other way round)."""
        end = self.store.end_of_input()
        return spark_batch_id + 1 if end is not None and spark_batch_id >= int(end["step"]) else spark_batch_id

    def on_batch(self, df: DataFrame, batch_id: int) -> None:
        try:
            self._run(df, self.step_of(batch_id), end_of_input=False, spark_batch_id=batch_id)
        except Exception as e:
            interruption = _interruption(e)
            if interruption is None:
                overflow = self._decimal_overflow(e)
                if overflow is not None:
                    raise overflow from None
                raise
            # the query was stopped in the middle of the batch. Spark's stream thread tells a stop from a
            # failure by the Python error's text, with a regex that recurses once per character of it
            # (StreamExecution.PROXY_ERROR): a Py4JJavaError's text, with its Java stack trace, is about
            # 10,000 characters, and the thread died of a StackOverflowError, printing a thousand lines.
            # The same words, short: Spark reads a stop, and the batch is run again by the next start
            raise BatchInterrupted(f"py4j.protocol.Py4JJavaError: An error occurred while calling Spark in "
                                   f"batch {batch_id}: {interruption} (the query was stopped)") from None
        except BaseException as e:
            # KeyboardInterrupt or SystemExit raised by code in this callback thread (a signal's goes to
            # the main thread): not an Exception, it ended py4j's callback without an answer and the
            # query waited for one for ever
            raise PipelineError(f"batch {batch_id} failed: {said(e)}, raised by the pipeline's code; raise an "
                                f"Exception (or a BadRecordError for a record to dead-letter) instead") from e

    def finish(self) -> None:
        """End of input, as the user declared it: one more step whose MAX watermark fires
        every window still open.

        It happens once per checkpoint. Its step id ``E`` is the one after the last step,
        recorded in the end-of-input marker before the step runs; a restart that finds the
        marker but not its completion redoes the step under the same id (replacing, not
        repeating, its output). Once done, a later ``finish`` does nothing: the combined
        watermark is already MAX, and whatever a later run reads is late."""
        end = self.store.end_of_input()
        if end is None:
            records = self.store.batch_records()
            step = max((int(r["batch_id"]) for r in records), default=-1) + 1
            end = {"step": step, "done": False}
            self.store.write_end_of_input(end)
        if end.get("done"):
            log.info("the input already ended at step %d; nothing more to fire", end["step"])
            return
        self._end_step(int(end["step"]))
        self.store.write_end_of_input({**end, "done": True})

    def _decimal_overflow(self, failure: BaseException) -> PipelineError | None:
        """:meth:`NativeProcessor.decimal_overflow`, on the native and executor paths."""
        return self.processor.decimal_overflow(failure) if isinstance(self.processor, NativeProcessor) else None

    def _end_step(self, step: int) -> None:
        """The end-of-input step, run from the driver outside the query: a failure in it (a user
        function's, on an executor) is said as a batch's is, not as PySpark's raw exception."""
        try:
            self._run(None, step, end_of_input=True)
        except UserFunctionError as e:  # said as on the keyed path, where it comes from an executor
            raise PipelineError(f"the end-of-input step failed: {type(e).__name__}: {e}") from e
        except LowwaterError:
            raise
        except BaseException as e:  # SystemExit too, as in a batch; a Ctrl-C stays one
            if isinstance(e, KeyboardInterrupt):
                raise
            overflow = self._decimal_overflow(e)
            if overflow is not None:
                raise PipelineError(f"the end-of-input step failed: {overflow}") from e
            cause = root_cause(e) if isinstance(e, Exception) else said(e)
            hint = hint_for(e)
            raise PipelineError(f"the end-of-input step failed: {cause}" + (f"; hint: {hint}" if hint else "")) from e

    def complete_end_of_input(self) -> None:
        """Before a query starts: finish an end-of-input step that a crash interrupted, so no
        later batch is processed against state that lacks it."""
        end = self.store.end_of_input()
        if end is not None and not end.get("done"):
            log.info("completing the end-of-input step %d that an earlier run did not finish", end["step"])
            self.finish()

    def _run(self, df: DataFrame | None, batch_id: int, end_of_input: bool, spark_batch_id: int | None = None) -> None:
        started = time.monotonic()
        if self.job.lease is not None:  # another run took the checkpoint: nothing more is written
            self.job.lease.check()
        record = self.store.batch_record(batch_id)
        if record is not None and bool(record.get("end_of_input")) != end_of_input:
            raise PipelineError(  # the step ids would overlap: never process one step as the other
                f"step {batch_id} is recorded as {'an end-of-input' if record.get('end_of_input') else 'a data'} "
                f"step but is being run as {'an end-of-input' if end_of_input else 'a data'} step; "
                f"the checkpoint {self.store.root.parent} is inconsistent")
        if record is None:
            record = {"batch_id": batch_id, "clock_ms": self.now(batch_id), "end_of_input": end_of_input}
            if spark_batch_id is not None:
                record["spark_batch_id"] = spark_batch_id
            self.store.write_batch_record(batch_id, record)
        faults.at("start", batch_id)
        session = self.spark
        if df is not None:  # a topic deleted and made again while the job runs: before anything is written
            self.store.check_sources(self.sources)
            if self.ticks_alone and batch_id > 0 and spark_batch_id is not None and \
                    _read_nothing(self.job.query, spark_batch_id):
                # a tick: the processors' batch without rows, with none of its jobs, in the batch's session
                session, df = df.sparkSession, None
        state = self._state_after(batch_id - 1)
        before = self._reported(state)  # before the processor mutates the state
        self.cached = None  # the processor mutates the state in place
        processor = self.processor
        out: BatchResult
        if isinstance(processor, JsonStateProcessor):  # run with the session
            out = processor.run(state, df, batch_id, record["clock_ms"], session, end_of_input=end_of_input)
            self.store.commit_json(batch_id, processor.state_to_json(state))
        else:
            pickled = processor.run(state, df, batch_id, record["clock_ms"], end_of_input=end_of_input)
            self.store.commit(batch_id, state, pickled.delta)
            out = pickled
        self.cached = (batch_id, state)
        faults.at("after_state", batch_id)
        metrics = dict(out.metrics)
        pairs: list[tuple[Sink, Any]] = list(zip(self.sinks, out.per_sink, strict=True))
        if self.dead_letter_sink is not None:
            dead = out.dead
            if isinstance(self.dead_letter_sink, DataFrameSink) and not isinstance(dead, Output):
                dead = dead_letter_output(self.spark, dead, self.several_sources)  # keyed and general rows, typed
            pairs.append((self.dead_letter_sink, dead))
        persisted = list(getattr(out, "persisted", ()))  # the keyed path's cached stage, read by its outputs
        counted: tuple[Any, DataFrame] | None = None  # the results' count, observed as their one sink writes them
        fired: int | None = None  # native: the result rows, one per (key, window) firing, whatever the sinks
        if isinstance(out, BatchOutput):  # native: each output computed once for all its sinks (collected or cached)
            for output in (out.results, out.late, out.dead):
                takers = [s for s, p in pairs if p is output]
                if output.frame is None:
                    if output is out.results:  # nothing fired
                        fired = 0
                    continue
                if not takers:
                    if output is out.results:  # no sink counts them: a job of their own, on a batch that fires
                        fired = output.frame.count()
                    continue
                if all(isinstance(s, DataFrameSink) for s in takers) and len(takers) == 1 and output is not out.results:
                    continue
                if not any(isinstance(s, DataFrameSink) for s in takers):
                    output.collected = output.rows()
                    n = len(output.collected)
                elif output is out.results and len(takers) == 1 and getattr(takers[0], "reads_every_row", False):
                    counted = _observe_count(output)  # no count job, no cache: the write counts them
                    continue
                else:
                    output.frame = output.frame.persist()
                    persisted.append(output.frame)
                    n = output.frame.count()
                if output is out.results:
                    fired = n
        try:
            for i, (sink, payload) in enumerate(pairs):
                if id(sink) not in self.opened:
                    sink.open()
                    self.opened.add(id(sink))
                _deliver(sink, payload, batch_id)
                if i == 0:
                    faults.at("after_first_sink", batch_id)
        finally:
            for frame in persisted:
                frame.unpersist()
        if counted is not None:
            fired = _observed_count(*counted)
        if fired is not None:
            metrics["windows_fired"] = fired
            if fired and isinstance(processor, NativeProcessor):  # the committed state counted none yet
                processor.record_fired(state, fired)
                self.store.amend_json(batch_id, processor.state_to_json(state))
        faults.at("after_sinks", batch_id)
        metrics.update(_dead_summary(out))  # why records were rejected, even with no dead-letter sink
        metrics["duration_ms"] = int((time.monotonic() - started) * 1000)
        metrics["state_bytes"] = self.store.size_bytes()
        names = self.partition_names
        if names is not None:  # the processors number partitions and sources; the metrics name them
            metrics, before = named_partitions(metrics, names), named_partitions(before, names)
        # the one place a processor's raw metrics become the typed line: counters per batch on every path
        line = MetricsLine.of_record({**record, "metrics": metrics}, before, running=running_totals(self.job.path),
                                     path=self.job.path)
        # beside the line, the fold of every batch through this one: a reader of the newest records
        # alone (a URI checkpoint, no metrics.jsonl) counts the batches of the records forgotten
        before_through = self._through.get(batch_id - 1)
        if before_through is None:
            previous_record = self.store.batch_record(batch_id - 1) if batch_id > 0 else None
            before_through = (previous_record or {}).get("through")
        through_line = metrics_through(line, before_through).to_json()
        self._through = {batch_id: through_line}
        self.store.write_batch_record(batch_id, {**record, "metrics": metrics, "line": line.to_json(),
                                                 "through": through_line})
        self.store.forget_batch_record(batch_id - KEEP_BATCH_RECORDS)
        self.last_batch = batch_id
        log.info("batch %d: %s", batch_id, json.dumps(metrics, default=str))
        if self.store.local:
            try:  # one line per batch in <checkpoint>/lowwater/metrics.jsonl (readers keep a replay's last line)
                metrics_log = MetricsLog(self.store.root.parent)
                metrics_log.append(line)
                if batch_id % FOLD_EVERY == 0 and batch_id > 0:  # the newest KEEP_LINES lines, one for the rest
                    metrics_log.fold(KEEP_LINES)
            except OSError as e:
                log.warning("batch %d: could not append to the metrics log: %s", batch_id, e)
        if self.on_metrics is not None:
            try:
                self.on_metrics(line.to_json())
            except Exception as e:  # the batch is committed: a reporting function's failure must not replay it
                log.warning("batch %d: on_metrics raised %s: %s", batch_id, type(e).__name__, e)

    def _reported(self, state: Any) -> dict[str, Any]:
        """What the processor reported after the batch that left ``state`` (``{}`` before the first):
        the native and keyed paths commit it with their JSON state, the general path's operators
        keep it as running totals."""
        processor = self.processor
        if isinstance(processor, JsonStateProcessor):
            return dict(processor.state_to_json(state).get("metrics") or {})
        return processor.totals(state)


class BatchInterrupted(Exception):
    """A batch whose Spark calls were interrupted because its query was stopped."""


_INTERRUPTIONS = ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                  "java.nio.channels.ClosedByInterruptException")
"""The exceptions by which Spark's stream thread knows an interrupted Python batch (its
``StreamExecution.IO_EXCEPTION_NAMES``)."""


def _interruption(e: BaseException) -> str | None:
    """The name of the Java interruption behind ``e`` (a ``Py4JJavaError``, its causes followed), or None."""
    java = getattr(e, "java_exception", None)
    for _ in range(20):
        if java is None:
            return None
        try:
            name = str(java.getClass().getName())
        except Exception:  # the gateway is gone: nothing to say
            return None
        if name in _INTERRUPTIONS:
            return name
        cause = java.getCause()
        if name == "org.apache.spark.SparkException" and cause is None and "cancelled" in str(java.getMessage()):
            # the batch's job cancelled by the stop (Spark's isInterruptionException: "cancelled" and the
            # query's job group): said as an interruption, which Spark takes for a stop only if it is one
            return "java.lang.InterruptedException"
        java = cause
    return None


def _observe_count(output: Output) -> tuple[Any, DataFrame]:
    """Have ``output``'s frame count its rows as a sink reads them (``observe``); returns the
    observation and the frame as it was, to count by itself should no sink action read it."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    assert output.frame is not None
    frame, seen = output.frame, Observation()
    output.frame = frame.observe(seen, F.count(F.lit(1)).alias("n"))
    return seen, frame


def _observed_count(seen: Any, frame: DataFrame) -> int:
    """The rows a sink's first action over the observed frame read; the frame's own count when
    no action read it (a Delta write skipped as already committed by a replayed batch).
    Spark fills an observation as the action that ran it ends (``SQLExecution``), not later."""
    jo = getattr(seen, "_jo", None)
    if jo is not None and jo.future().isCompleted():
        return int(seen.get["n"])
    return int(frame.count())


def _dead_summary(out: BatchResult) -> dict[str, Any]:
    """The batch's dead-letter reasons and one sample (:mod:`lowwater.metrics.dead_letters`); on the
    native paths computed by Spark (a count per reason kind and one row), not from collected rows."""
    from lowwater.metrics.dead_letters import SAMPLE_CHARS, TOP_REASONS, summarize_dead

    dead = out.dead
    if not isinstance(dead, Output):
        return summarize_dead(dead)
    if dead.collected is not None or dead.frame is None:
        return summarize_dead(dead.rows())
    frame = dead.dataframe()
    assert frame is not None
    kinds = (frame.selectExpr("substring_index(reason, ': ', 1) AS kind").groupBy("kind").count()
             .orderBy("count", ascending=False).limit(TOP_REASONS).collect())
    first = frame.limit(1).collect()
    if not first:
        return {}
    row = first[0]
    sample = {"reason": row["reason"], "partition": row["partition"], "offset": row["offset"],
              "record": (row["record"] or "")[:SAMPLE_CHARS],
              **({"source": row["source"]} if "source" in frame.columns and row["source"] is not None else {})}
    return {"dead_letter_reasons": {r["kind"]: int(r["count"]) for r in kinds}, "dead_letter_sample": sample}


def _deliver(sink: Sink, payload: Any, batch_id: int) -> None:
    """One output to one sink: a DataFrame to a :class:`DataFrameSink`, rows to a row-list sink."""
    if not isinstance(payload, Output):  # rows, from the general path
        sink.write_batch(batch_id, payload)
    elif isinstance(sink, DataFrameSink):
        if payload.frame is None and not sink.empty_batches:  # known empty: no call, no job
            return
        frame = payload.dataframe()
        if frame is not None:
            sink.write(frame, batch_id)
    else:  # a row-list sink: its rows come to the driver, as the user asked
        sink.write_batch(batch_id, payload.rows())


def _clock_of(times: Sequence[Sequence[int]]) -> Callable[[int], int]:
    """The clock of batch ``b`` from the sources' processing times per batch: the latest of them, as
    the reference runtime takes it; a batch past a source's list keeps its last time."""
    return lambda b: max(ts[b] if b < len(ts) else ts[-1] for ts in times)


def run_batches(
    pipeline: PipelineLike, checkpoint_location: str, processing_times_ms: Sequence[int] | None = None,
    **kwargs: Any,
) -> SparkJob:
    """Run a bounded pipeline to its end on Spark (one micro-batch per source batch)."""
    clock = _clock_of([list(processing_times_ms)]) if processing_times_ms else None
    return SparkRuntime(checkpoint_location, clock=clock, **kwargs).execute(pipeline)
