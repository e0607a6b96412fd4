"""``lowwater``: the command line.

    lowwater run PIPELINE.py [--checkpoint DIR] [--runtime spark|reference]
    lowwater status CHECKPOINT [--batches N] [--json]
    lowwater plot CHECKPOINT -o FILE.png|.svg|.html
    lowwater scenario run FILE.json [--runtime reference|spark] [--source kafka [--bootstrap-servers H:P]]
    lowwater demo

Errors print one line with a hint; ``--verbose`` adds the traceback (and Spark's logs).

The pipeline file of ``lowwater run`` is plain Python that defines::

    def build(env: StreamExecutionEnvironment) -> None:
        # sources, transformations and sinks, on env
        ...

    RUNTIME_OPTIONS = {"trigger": "available_now"}   # optional

``build`` wires sources and sinks on the environment it is given (its return value is
ignored). ``RUNTIME_OPTIONS`` is optional: keyword arguments for the runtime. For
``SparkRuntime`` they are ``path``, ``trigger``, ``clock``, ``end_of_input``,
``snapshot_every`` and ``dead_letter_sink``; for ``ReferenceRuntime`` they are ``clock``,
``max_batches`` and ``dead_letter_sink``.
``clock`` is a :class:`~lowwater.core.clock.Clock` or a function of the batch id on both.
Options for the other runtime are ignored, and an unknown option is an error.
The file's directory is importable while it loads, and relative paths are relative to
the working directory (use ``Path(__file__).parent`` for paths next to the file).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import logging
import os
import re
import signal
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from lowwater.core.errors import ConfigurationError, LowwaterError, QueryFailedError
from lowwater.core.failures import hint_for, root_cause

__all__ = ["main"]

PLOT_BATCHES = 500
"""How many of the newest batches ``lowwater plot`` draws unless told (``-n``)."""

log = logging.getLogger("lowwater.cli")

SPARK_OPTIONS = ("path", "trigger", "clock", "end_of_input", "snapshot_every", "dead_letter_sink", "on_metrics")
REFERENCE_OPTIONS = ("clock", "max_batches", "dead_letter_sink")


class CliError(LowwaterError):
    """A command cannot proceed; the message ends with a hint."""


_RUN_HELP = """\
Run PIPELINE.py and print one line per micro-batch: the combined watermark, its lag
behind processing time, idle partitions, rows in, late rows, windows fired and the
batch's duration. Then `lowwater status DIR` and `lowwater plot DIR -o FILE.png`.

PIPELINE.py defines build(env), which adds sources, transformations and sinks to the
StreamExecutionEnvironment it is given, and optionally RUNTIME_OPTIONS:

    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.spark.sources import PartitionedLogSource

    RUNTIME_OPTIONS = {"trigger": "1 second"}  # optional; see below

    def build(env):
        source = PartitionedLogSource("clicks-log", [("user", "STRING"), ("ts", "BIGINT")])
        strategy = WatermarkStrategy.for_bounded_out_of_orderness("5 s").with_timestamp_assigner("ts")
        (env.from_source(source, strategy).key_by("user")
            .window(TumblingEventTimeWindows.of("1 min")).count().print())

RUNTIME_OPTIONS are keyword arguments for the runtime: path, trigger, clock, end_of_input,
snapshot_every, dead_letter_sink, on_metrics (spark); clock, max_batches, dead_letter_sink
(reference).
clock is a Clock or a function of the batch id. An interval trigger runs until Ctrl-C;
rerunning resumes from the checkpoint.
With the default trigger, available_now, a run reads what the source holds and stops with
the windows that are still open kept in the checkpoint; the next run resumes there, so a
series of runs equals one. --end-of-input (or end_of_input=True) declares the input
complete: a MAX watermark fires every open window, once, and for good.
On the spark runtime the Spark session is started before build(env) runs, so build() can
make streaming DataFrames for DataFrameSource with SparkSession.getActiveSession().

On a cluster, give this module's file to spark-submit with the same arguments; the master
and the rest of Spark's configuration come from spark-submit:

    spark-submit --master spark://HOST:7077 {cli} \\
        run PIPELINE.py --checkpoint hdfs://NAMENODE:8020/checkpoints/JOB

with --jars for the jars a pipeline's sources and sinks need (./dev's jars/spark: Kafka's
connector, Delta, and lowwater-jvm.jar, the Kafka source's reader).
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lowwater", description="Flink's event-time model on Spark.",
        epilog="Start with `lowwater demo`, then `lowwater status out/demo/checkpoints/lowwater`.",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="show tracebacks, debug logs and Spark's logs")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run a pipeline file that defines build(env), one progress line per batch",
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         description=_RUN_HELP.replace("{cli}", str(Path(__file__).resolve())))
    run.add_argument("file", metavar="PIPELINE.py", help="the pipeline file")
    run.add_argument("--checkpoint", metavar="DIR",
                     help="checkpoint location (default: checkpoints/<file name>); a rerun on spark resumes from "
                          "it (the reference runtime starts over, keeping only its metrics there)")
    run.add_argument("--runtime", choices=["spark", "reference"], default="spark",
                     help="spark (default), or the in-process reference runtime")
    run.add_argument("--end-of-input", action="store_true",
                     help="declare the input complete (spark, available_now): a MAX watermark fires every "
                          "open window, and records read by later runs are late; without it a rerun resumes")

    st = sub.add_parser("status", help="watermarks, idle partitions, state and the last batches of a checkpoint")
    st.add_argument("checkpoint", metavar="CHECKPOINT", help="the job's checkpoint location")
    st.add_argument("--batches", "-n", type=_count, default=10, metavar="N", help="show the last N batches (10)")
    st.add_argument("--json", action="store_true", help="print the summary and the last N metrics lines as JSON")

    pl = sub.add_parser("plot", help="draw a checkpoint's watermark timeline (.png, .svg or .html)")
    pl.add_argument("checkpoint", metavar="CHECKPOINT", help="the job's checkpoint location")
    pl.add_argument("-o", "--output", required=True, metavar="FILE", help="FILE.png, FILE.svg or FILE.html")
    pl.add_argument("--title", default="", help="the picture's title")
    pl.add_argument("--batches", "-n", type=_count, default=PLOT_BATCHES, metavar="N",
                    help=f"draw the last N batches ({PLOT_BATCHES}; 0: all of them)")

    sc = sub.add_parser("scenario", help="run scenario transcripts (examples/scenarios/FORMAT.md)")
    sc_sub = sc.add_subparsers(dest="scenario_command", required=True)
    srun = sc_sub.add_parser("run", help="run one scenario and print its output JSON")
    srun.add_argument("file", help="the scenario JSON file")
    srun.add_argument("--runtime", choices=["reference", "spark"], default="reference")
    srun.add_argument("--source", choices=["files", "kafka"], default="files",
                      help="spark: read batch files (default) or a real Kafka topic (lowwater.scenario_kafka)")
    srun.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="with --source kafka (default: a local broker)")

    demo = sub.add_parser("demo", help="a lagging and an idle partition: Spark's watermark vs lowwater")
    demo.add_argument("--out", default="out/demo", help="where the demo writes its files")
    demo.add_argument("--kafka", action="store_true", help="the same demo through a real Kafka broker")
    demo.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="with --kafka (default: a local broker)")
    for command in (run, st, pl, srun, demo):  # after the command too, where its own error's hint is read
        command.add_argument("--verbose", "-v", action="store_true", default=argparse.SUPPRESS,
                             help="show tracebacks, debug logs and Spark's logs")
    return p


# -- scenario, demo ---------------------------------------------------------------------
def _scenario_run(args: argparse.Namespace) -> int:
    from lowwater.scenario import run_scenario

    if args.source == "kafka" and args.runtime != "spark":
        raise ConfigurationError("--source", "kafka needs --runtime spark")
    if args.source == "kafka":
        from lowwater.scenario_kafka import run_scenario_on_kafka

        doc = run_scenario_on_kafka(args.file, bootstrap_servers=args.bootstrap_servers)
    else:
        doc = run_scenario(args.file, runtime=args.runtime)
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    if "error" in doc:
        print(f"lowwater: the job failed: {doc['error']['message']}", file=sys.stderr)
        return 1
    return 0


def _demo(args: argparse.Namespace) -> int:
    if args.bootstrap_servers and not args.kafka:  # it was ignored, and the file demo ran
        raise ConfigurationError("--bootstrap-servers", "is for the Kafka demo: add --kafka")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise CliError(f"--out {args.out} is a file; hint: give the demo a directory to write its files in")
    if args.kafka:  # lowwater.demo_kafka: the same demo through a real broker
        from lowwater.demo_kafka import run_kafka_demo

        return int(run_kafka_demo(args.out if args.out != "out/demo" else "out/demo-kafka", args.bootstrap_servers))
    from lowwater.demo import run_demo

    return int(run_demo(args.out))


# -- status, plot -----------------------------------------------------------------------
def _checkpoint_lines(location: str) -> list[dict[str, Any]]:
    """A checkpoint's metrics lines: a local path (or ``file:`` URI) read directly; any other
    Hadoop URI (``hdfs:``, ``s3a:``...) from its batch records, through the Hadoop file system of
    a Spark session (the active one, or a local one started for it)."""
    from urllib.parse import unquote, urlparse

    from lowwater.metrics.log import read_checkpoint
    from lowwater.spark.fs import is_uri

    if not is_uri(location):
        return read_checkpoint(location)
    if location.partition(":")[0].lower() == "file":
        return read_checkpoint(unquote(urlparse(location).path))
    from lowwater.spark.session import get_or_create_session
    from lowwater.spark.state import checkpoint_lines

    # reading a checkpoint needs no web UI (it said "Service 'SparkUI' could not bind on port 4040" beside a job)
    spark = get_or_create_session(app_name="lowwater status", conf={"spark.ui.showConsoleProgress": "false",
                                                                    "spark.ui.enabled": "false"})
    with _spark_logging_off(spark):
        return checkpoint_lines(location, spark)


def _status(args: argparse.Namespace) -> int:
    from lowwater.observe.status import render_status, status_json

    lines = _checkpoint_lines(args.checkpoint)
    if args.json:
        json.dump(status_json(args.checkpoint, lines, args.batches), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_status(args.checkpoint, lines, args.batches))
    return 0


def _plot(args: argparse.Namespace) -> int:
    from lowwater.metrics.line import processes
    from lowwater.observe.plot import FORMATS, plot_watermarks
    from lowwater.observe.status import fired_text

    out = Path(args.output)
    if out.suffix.lower() not in FORMATS:
        raise CliError(f"cannot draw {out.name}: the output must end in .png, .svg or .html; "
                       "hint: lowwater plot CHECKPOINT -o watermarks.png")
    lines = _checkpoint_lines(args.checkpoint)
    if not [x for x in lines if not x.get("end_of_input")]:
        raise CliError(f"{args.checkpoint} has no finished micro-batch to draw yet; "
                       "hint: wait for the job's first batch (lowwater status shows it)")
    if not out.parent.is_dir():
        raise CliError(f"cannot write {out}: no directory {out.parent}; hint: create it first")
    every = len(lines)
    if args.batches:  # a stream's log keeps 10,000 lines (metrics.log.KEEP_LINES): drawn, minutes and unreadable
        lines = lines[-args.batches:]
    data = plot_watermarks(lines, out, args.title or f"lowwater watermarks: {args.checkpoint}")
    late = sum(n for _, _, n in data["late"])
    # the end-of-input step is no batch of data: status counts it among its batches, the picture does not
    ended = " and the end of input" if any(x.get("end_of_input") for x in lines) else ""
    last = f"the last {len(data['x'])}" if len(lines) < every else f"{len(data['x'])}"
    print(f"wrote {out}: {last} batches{ended}, {len(data['partitions'])} partitions, "
          f"{late} late rows, "
          + fired_text(sum(n for _, n in data["fired"]), processes(lines)))
    return 0


# -- run --------------------------------------------------------------------------------
def load_pipeline(file: str | Path) -> ModuleType:
    """Import a pipeline file; it must define ``build(env)``."""
    path = Path(file)
    if path.is_dir():
        raise CliError(f"{path} is a directory, not a pipeline file; hint: pass a .py file that defines build(env)")
    if not path.is_file():
        raise CliError(f"no such pipeline file: {path}; hint: pass a .py file that defines build(env)")
    name = "lowwater_pipeline_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot load {path} as Python; hint: pass a .py file that defines build(env)")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except LowwaterError:
        raise
    except Exception as e:
        raise CliError(f"{path} failed while loading: {type(e).__name__}: {e}; "
                       "hint: run it with python to see where (or add --verbose)") from e
    finally:
        sys.path.remove(str(path.resolve().parent))
    if not callable(getattr(module, "build", None)):
        raise CliError(f"{path} defines no build(env) function; hint: add `def build(env): ...` that adds "
                       "sources and sinks to env (see `lowwater run --help`)")
    return module


def _runtime_options(module: ModuleType, runtime: str) -> dict[str, Any]:
    options = getattr(module, "RUNTIME_OPTIONS", None) or {}
    if not isinstance(options, dict):
        raise CliError(f"RUNTIME_OPTIONS must be a dict, got {type(options).__name__}; "
                       "hint: RUNTIME_OPTIONS = {\"trigger\": \"available_now\"}")
    mine = SPARK_OPTIONS if runtime == "spark" else REFERENCE_OPTIONS
    unknown = sorted(set(options) - set(SPARK_OPTIONS) - set(REFERENCE_OPTIONS))
    if unknown:
        raise CliError(f"RUNTIME_OPTIONS has unknown option(s) {unknown}; hint: the spark runtime takes "
                       f"{list(SPARK_OPTIONS)}, the reference runtime {list(REFERENCE_OPTIONS)}")
    ignored = sorted(set(options) - set(mine))
    if ignored:
        log.info("RUNTIME_OPTIONS %s do not apply to the %s runtime; ignored", ignored, runtime)
    return {k: v for k, v in options.items() if k in mine}


def _build(module: ModuleType, file: str) -> Any:
    from lowwater.api import StreamExecutionEnvironment

    env = StreamExecutionEnvironment()
    try:
        module.build(env)
    except LowwaterError:
        raise
    except Exception as e:
        raise CliError(f"build(env) in {file} raised {type(e).__name__}: {e}; hint: fix build() "
                       "(--verbose shows the traceback)") from e
    if not env.sinks:
        raise CliError(f"build(env) in {file} added no sink; hint: end the pipeline with .add_sink(...), "
                       ".collect() or .print()")
    return env


def _run(args: argparse.Namespace) -> int:
    module = load_pipeline(args.file)
    options = _runtime_options(module, args.runtime)
    name = Path(args.file).stem
    if args.runtime == "reference":
        return _run_reference(_build(module, args.file), name, options, args.checkpoint)
    if args.end_of_input:
        options["end_of_input"] = True
    checkpoint = args.checkpoint or str(Path("checkpoints") / name)
    spark = _spark_session(name, checkpoint)  # before build(): it may read DataFrames (DataFrameSource)
    return _run_spark(spark, _build(module, args.file), name, options, checkpoint, args.verbose)


class _BatchClock:
    """A function of the batch id as a Clock: the reference runtime reads it once per batch."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.batch = 0

    def now_ms(self) -> int:
        now = int(self.fn(self.batch))
        self.batch += 1
        return now


def _run_reference(env: Any, name: str, options: dict[str, Any], checkpoint: str | None) -> int:
    """The reference runtime runs in-process; its batches are printed once it has run them."""
    from lowwater.metrics.log import MetricsLog
    from lowwater.observe.progress import PROGRESS_HEADER, operators_summary, print_progress
    from lowwater.runtime.reference import ReferenceRuntime
    from lowwater.spark.fs import is_uri

    if checkpoint is not None and is_uri(checkpoint):  # it would be a local directory named "hdfs:"
        raise CliError(f"the reference runtime keeps its metrics log in a local directory, not at {checkpoint}; "
                       "hint: give --checkpoint a local path, or run on Spark (--runtime spark)")
    if checkpoint is not None and Path(checkpoint).exists() and not Path(checkpoint).is_dir():
        raise CliError(f"--checkpoint {checkpoint} is a file, not a directory; hint: give a directory for the "
                       "run's metrics log")
    if checkpoint is not None and (Path(checkpoint) / "spark").exists():
        raise CliError(f"{checkpoint} holds a Spark job's checkpoint; hint: give the reference runtime "
                       "another --checkpoint directory")
    clock = options.get("clock")
    if callable(clock) and not hasattr(clock, "now_ms"):
        options = {**options, "clock": _BatchClock(clock)}
    result = ReferenceRuntime(**options).execute(env, name)
    print(f"lowwater run {name}: reference runtime, {len(result.batches)} batches")
    print(PROGRESS_HEADER)
    mlog = MetricsLog(checkpoint) if checkpoint is not None else None
    if mlog is not None:
        mlog.path.unlink(missing_ok=True)  # a reference run does not resume: its log starts over
    lines = result.lines()
    for line in lines:
        if mlog is not None:
            mlog.append(line)
        print_progress(line.to_json())
    operators = operators_summary([line.to_json() for line in lines])
    if operators:
        print(operators)
    if result.dead_letters:
        from lowwater.metrics.dead_letters import describe_reasons, summarize_dead

        reasons = summarize_dead(result.dead_letters)["dead_letter_reasons"]
        print(f"{len(result.dead_letters)} records dead-lettered ({describe_reasons(reasons)})", file=sys.stderr)
    if checkpoint is not None:
        print(f"metrics: {MetricsLog(checkpoint).path}\nnext: lowwater status {checkpoint}; "
              f"lowwater plot {checkpoint} -o watermarks.png")
    return 0


def _spark_session(name: str, checkpoint: str) -> Any:
    """The session the run uses, started (or the active one taken) before ``build(env)`` runs, so
    that a pipeline reads its streaming DataFrames with it: ``SparkSession.getActiveSession()``."""
    from lowwater.metrics.log import CheckpointError
    from lowwater.spark.session import get_or_create_session, postgres_jdbc_jar

    # a pipeline file cannot give the session jars (build() runs in it): the PostgreSQL JDBC driver
    # where it is installed, for a PostgresSink (spark-submit's --jars otherwise)
    jdbc = postgres_jdbc_jar()
    spark = get_or_create_session(app_name=f"lowwater {name}", jars=[jdbc] if jdbc else [],
                                  conf={"spark.ui.showConsoleProgress": "false"})
    try:
        done = len(_checkpoint_lines(checkpoint))
    except CheckpointError:  # nothing there yet: a new job
        done = 0
    if done:
        print(f"{checkpoint} holds {done} batches: resuming from them if they are this pipeline's; "
              "pass --checkpoint NEW_DIR to start over")
    return spark


def _run_spark(spark: Any, env: Any, name: str, options: dict[str, Any], checkpoint: str, verbose: bool) -> int:
    if verbose:
        return _run_on_spark(spark, env, name, options, checkpoint)
    with _spark_logging_off(spark):  # failures are reported in one line
        return _run_on_spark(spark, env, name, options, checkpoint)


@contextlib.contextmanager
def _spark_logging_off(spark: Any) -> Iterator[None]:
    """Spark's (log4j2) logging off while the run lasts, then the root logger's level as it was,
    also when the run fails: the session may be one that was already active (``main`` called
    from a notebook, a test, or an application), which must not be left silenced."""
    jvm = spark.sparkContext._jvm
    before = jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel()
    spark.sparkContext.setLogLevel("OFF")
    try:
        yield
    finally:
        _wait_for_tasks(spark)
        name = str(before.name())
        if name in _SPARK_LOG_LEVELS:  # as it was set: Spark's way, which may also tell the executors
            spark.sparkContext.setLogLevel(name)
        else:  # a custom level from the user's log4j2 configuration, which setLogLevel refuses
            jvm.org.apache.logging.log4j.core.config.Configurator.setRootLevel(before)


def _wait_for_tasks(spark: Any, timeout_s: float = 10.0) -> None:
    """Wait until no task runs (at most ``timeout_s``): a run stopped in the middle of a batch
    (Ctrl-C, SIGTERM) cancels its Spark job at once, but the job's tasks end later, each logging
    its cancellation (``FileFormatWriter: Aborting job``, ``TaskSetManager: Lost task``, about 80
    lines with their stacks) once :func:`_spark_logging_off` had set the level back."""
    try:
        deadline = time.monotonic() + timeout_s
        while _running_tasks(spark) and time.monotonic() < deadline:
            time.sleep(0.1)
    except Exception as e:  # a context already stopped: nothing runs
        log.debug("could not wait for Spark's tasks: %s", e)


def _running_tasks(spark: Any) -> int:
    """The tasks running on every executor, as the task scheduler counts them: a cancelled job
    leaves Spark's status tracker at once (and its executor infos count no task in local mode),
    while its tasks run on until they see the cancellation."""
    counts = spark.sparkContext._jsc.sc().taskScheduler().runningTasksByExecutors().valuesIterator()
    running = 0
    while counts.hasNext():
        running += int(counts.next())
    return running


_SPARK_LOG_LEVELS = frozenset({"ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN"})
"""The levels ``SparkContext.setLogLevel`` accepts."""


def _deliver_pending_events(spark: Any, timeout_ms: int = 10_000) -> None:
    """Wait until Spark has delivered the events already posted (the query's termination) to
    its listeners, the progress listener's Python side included. Delivered later, while this
    process exits, such a call fails in py4j, and Spark logs the failure with its trace on
    stderr once the log level is back (:func:`_spark_logging_off`)."""
    try:
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(timeout_ms)
    except Exception as e:  # a timeout: go on without
        log.debug("Spark's listener bus not empty after %d ms: %s", timeout_ms, e)


def _quiet_closed_accumulator_connection(spark: Any) -> None:
    """PySpark's accumulator server prints a traceback when the JVM closes its connection before
    the server is told to shut down (an ``EOFError``: ``SparkContext.stop`` stops the JVM first,
    and a Ctrl-C run stops it while the server thread polls). Nothing was lost: there was no
    update left to read. Such a closed connection is logged at debug level; any other error in
    the server is printed as before."""
    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    if server is None:
        return
    default = server.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], EOFError):
            log.debug("the JVM closed its accumulator connection from %s", client_address)
            return
        default(request, client_address)

    server.handle_error = handle_error


_STOPPED_BY: list[int] = []
"""The signals that asked ``lowwater run`` on Spark to stop (:func:`_run_on_spark`). A stop signal
sent to the job's whole process group or control group (systemd's default ``KillMode``,
``kill -TERM -- -PGID``) also ends Spark's JVM: the calls into it then fail, and the stop was
reported as an error, exit 2 (a user probe, session 54). It is reported as the stop it is."""


def _interrupted(signum: int, checkpoint: str | None) -> int:
    """Say the run was stopped by ``signum``; its exit code, 128 + the signal's number (py4j's
    reports of its lost connections are kept out by :func:`main`, unless ``--verbose``)."""
    by = "" if signum == signal.SIGINT else f" ({signal.Signals(signum).name})"
    where = f"from {checkpoint}" if checkpoint is not None else "from its checkpoint"
    print(f"\ninterrupted{by}: the checkpoint keeps the progress; rerun to resume {where}", flush=True)
    return 128 + signum


def _run_on_spark(spark: Any, env: Any, name: str, options: dict[str, Any], checkpoint: str) -> int:
    from lowwater.metrics.line import MetricsLine, fold_lines
    from lowwater.metrics.log import MetricsLog
    from lowwater.observe.progress import PROGRESS_HEADER, dead_letter_summary, operators_summary, print_progress
    from lowwater.spark.engine import SparkRuntime, query_name, signals_caught, wait_for
    from lowwater.spark.fs import is_uri, join, resolve
    from lowwater.spark.listener import LowwaterProgressListener

    checkpoint = resolve(checkpoint, spark)  # a plain path on a cluster whose fs.defaultFS is HDFS: its hdfs: URI
    _quiet_closed_accumulator_connection(spark)
    listener = LowwaterProgressListener(checkpoint, query_name=query_name(name))
    run: list[MetricsLine] = []  # the run's batches as one line (a run lasts weeks: until session 41 it kept them all)
    theirs = options.get("on_metrics")
    if theirs is not None and not callable(theirs):
        raise ConfigurationError("on_metrics", f"expected a function of a metrics line, got {theirs!r}")

    header: list[bool] = []

    def table_header() -> None:  # once the query runs: a pipeline its checkpoint refuses gets the error alone
        if not header:
            header.append(True)
            print(PROGRESS_HEADER, flush=True)

    def report(line: dict[str, Any]) -> None:  # on the driver, as each batch commits: any checkpoint's file system
        run[:] = [fold_lines([*run, MetricsLine.from_json(line)])]
        listener.record(line)
        table_header()
        print_progress(line)
        if theirs is not None:
            theirs(line)

    runtime = SparkRuntime(checkpoint, spark=spark, **{**options, "on_metrics": report})
    spark.streams.addListener(listener)
    print(f"lowwater run {name}: spark, checkpoint {checkpoint}, trigger {runtime.trigger}", flush=True)
    job = None
    # Ctrl-C and SIGTERM (how a deployment, systemd or Kubernetes, stops a job) only ask the run to
    # stop, from the start on: the runtime checks before the end-of-input step, the loop below
    # between its one-second waits (signals_caught says why the handlers are lowwater's)
    interrupted = runtime.stop_requested
    stopped_by = _STOPPED_BY
    try:
        with signals_caught((signal.SIGINT, signal.SIGTERM), stopped_by, interrupted):
            job = runtime.execute(env, name)
            if job.query is not None and job.query.isActive and not interrupted.is_set():
                table_header()
                print("running until Ctrl-C", flush=True)
                wait_for(job.query, interrupted.is_set)
                job.stop(wait_s=0)  # at once (Spark's logging is off); the query and the checkpoint's lease
                if job.query.exception() is not None:
                    raise CliError(f"the streaming query failed: {root_cause(str(job.query.exception()))}; "
                                   "hint: fix the cause and rerun; the job resumes from its checkpoint")
        if interrupted.is_set():
            return _interrupted(stopped_by[0] if stopped_by else signal.SIGINT, checkpoint)
    finally:
        _deliver_pending_events(spark)
        spark.streams.removeListener(listener)
    operators = operators_summary([x.to_json() for x in run])
    if operators:
        print(operators)
    summary = dead_letter_summary([x.to_json() for x in run], "dead_letter_sink" in options)
    if summary:
        print(summary, file=sys.stderr)
    where = join(checkpoint, "lowwater", "batches") if is_uri(checkpoint) else MetricsLog(checkpoint).path
    print(f"{run[0].folded_batches if run else 0} batches on the {job.path} path ({job.reason}); metrics: {where}\n"
          f"next: lowwater status {checkpoint}; lowwater plot {checkpoint} -o watermarks.png")
    return 0


# -- errors -----------------------------------------------------------------------------
def _error(e: BaseException, command: str, verbose: bool) -> int:
    """Every command's failure as one line on stderr (exit code 2), with a hint; ``--verbose``
    adds the traceback."""
    if verbose:
        traceback.print_exc()
    if isinstance(e, FileNotFoundError):
        text, hint = f"no such file: {e.filename}", ""
    elif isinstance(e, LowwaterError) and command in ("scenario", "demo"):
        text, hint = str(e), ""  # a scenario's errors name the field already
    elif isinstance(e, ConfigurationError):  # lowwater's own message, whole: its end names the cause
        text = str(e)
        hint = "" if e.parameter in ("checkpoint_location", "checkpoint") else \
            f"check {e.parameter}" + (" in build()" if command == "run" else "")
    else:
        # the useful line of a long (JVM, Python worker) message; a failed query's message is that line
        # already, and its hint, which the usual limit cut in the middle (a user probe, session 59)
        text = root_cause(str(e), limit=max(400, len(str(e))) if isinstance(e, QueryFailedError) else 400)
        known = hint_for(e)  # a missing module, jar or file system; a service that does not answer
        if known and "hint:" not in text:
            hint = known
        elif isinstance(e, LowwaterError):
            hint = "" if isinstance(e, CliError) else "--verbose shows the traceback"
        else:  # Spark, py4j, the JVM
            hint = f"run with --verbose for the full trace ({type(e).__name__})"
    if hint and "hint:" not in text:
        text = f"{text.rstrip('.')}; hint: {hint}"
    print(f"lowwater: error: {text}", file=sys.stderr)
    return 2


COMMANDS = {"status": _status, "plot": _plot, "run": _run, "scenario": _scenario_run, "demo": _demo}


def _count(text: str) -> int:
    """A number of batches: an integer >= 0 (``-n -1`` was taken, and showed all but the first)."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return n


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    # py4j logs a failing foreachBatch's traceback itself; the error is reported in one line below.
    # Put back as found: main() also runs in-process (a notebook, a test) beside other py4j users.
    py4j = logging.getLogger("py4j")
    was = py4j.level
    py4j.setLevel(logging.INFO if args.verbose else logging.CRITICAL)
    # py4j also logs a call into a JVM that has ended on the root logger (`logging.exception`, with its
    # traceback): a run stopped by a signal to its process group, whose JVM ended with it, printed one
    root = logging.getLogger()
    if not args.verbose:
        root.addFilter(_not_py4j)
    _STOPPED_BY.clear()  # a stop of an earlier call in this process (a notebook, a test) is not this one's
    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:  # the reader went away (`lowwater status --json | head`): not an error of ours
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115  # Python's exit flush would raise again
        return 0
    except Exception as e:
        if _STOPPED_BY:  # the stop's signal took Spark's JVM down with it: a stop all the same
            return _interrupted(_STOPPED_BY[0], None)
        return _error(e, args.command, args.verbose)
    finally:
        py4j.setLevel(was)
        root.removeFilter(_not_py4j)


def _not_py4j(record: logging.LogRecord) -> bool:
    """Whether a record logged on the root logger is not py4j's (its module's path)."""
    return f"{os.sep}py4j{os.sep}" not in record.pathname


if __name__ == "__main__":
    sys.exit(main())
