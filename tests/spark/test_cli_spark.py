"""``lowwater run`` on Spark as a user drives it: reruns over a growing log, dead letters
that are shown, not hidden, and failures whose first line names their cause."""

from __future__ import annotations

import logging
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lowwater.cli import main
from lowwater.io import PartitionedLogWriter
from lowwater.observe.metrics import read_checkpoint
from tests.spark.crash_series import JVM_OPTIONS  # C1 only, serial GC: for a JVM of its own

pytestmark = pytest.mark.spark

PIPELINE = """
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.sinks import DirectorySink
from lowwater.spark.sources import PartitionedLogSource

RUNTIME_OPTIONS = {{"clock": lambda b: 1_000 * b{extra}}}

def build(env):
    source = PartitionedLogSource({log!r}, [("user", "STRING"), ("ts", "{ts_type}"), ("n", "BIGINT")],
                                  max_files_per_trigger=1)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    (env.from_source(source, strategy).key_by("user").window(TumblingEventTimeWindows.of(10_000)).sum("n")
        .add_sink(DirectorySink({out!r}, "jsonl")))
"""


def _pipeline(tmp_path: Path, log: Path, ts_type: str = "BIGINT", extra: str = "") -> str:
    path = tmp_path / "p.py"
    path.write_text(textwrap.dedent(PIPELINE.format(log=str(log), out=str(tmp_path / "out"), ts_type=ts_type,
                                                    extra=extra)))
    return str(path)


def _records(start: int, n: int) -> list[dict[str, Any]]:
    return [{"user": "u", "ts": start + 1_000 * i, "n": 1} for i in range(n)]


def test_rerunning_lowwater_run_after_new_records_loses_none_and_status_counts_them(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The metrics log folded at every batch (as every FOLD_EVERY batches in a long run) still
    counts every row."""
    monkeypatch.setattr("lowwater.spark.engine.FOLD_EVERY", 1)
    monkeypatch.setattr("lowwater.spark.engine.KEEP_LINES", 1)
    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    writer.append(0, _records(0, 20))
    p, ck = _pipeline(tmp_path, log), str(tmp_path / "ck")
    assert main(["run", p, "--checkpoint", ck]) == 0
    writer.append(0, _records(20_000, 15))
    assert main(["run", p, "--checkpoint", ck]) == 0
    assert main(["run", p, "--checkpoint", ck, "--end-of-input"]) == 0
    assert "batches on the native path (native)" in capsys.readouterr().out, "the last line names the path"
    lines = read_checkpoint(ck)
    assert sum(x["rows_in"] for x in lines) == 35
    assert lines[0]["folded_from"] == 0 and lines[0]["folded_batches"] == lines[0]["batch_id"] + 1
    assert main(["status", ck]) == 0
    status = capsys.readouterr().out
    assert "35 rows in = 35 windowed + 0 late + 0 dead-lettered (balanced)" in status
    assert "end of input reached" in status
    from lowwater.spark.sinks import read_directory

    assert sorted((r["window_start"], r["value"]) for r in read_directory(tmp_path / "out")) == [
        (0, 10), (10_000, 10), (20_000, 10), (30_000, 5)]
    # a changed pipeline is refused before a batch: the error alone, no batch table's header above it
    assert main(["run", _pipeline(tmp_path, log, ts_type="DOUBLE"), "--checkpoint", ck]) == 2
    refused = capsys.readouterr()
    assert "field 'ts' was BIGINT, now DOUBLE" in refused.err and "combined watermark" not in refused.out, refused


def test_a_run_that_dead_letters_every_row_warns_loudly_and_status_shows_why(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log"
    PartitionedLogWriter(log, "jsonl").append(0, [{"user": "yesterday", "n": 1} for _ in range(4)])
    dead = tmp_path / "dead"
    extra = f', "dead_letter_sink": DirectorySink({str(dead)!r}, "jsonl")'
    ck = str(tmp_path / "ck")
    assert main(["run", _pipeline(tmp_path, log, extra=extra), "--checkpoint", ck]) == 0
    err = capsys.readouterr().err
    assert "WARNING: batch 0 dead-lettered every one of its 4 rows" in err
    assert "missing or non-numeric timestamp (ts) x4" in err, "reasons are grouped by their kind"
    assert "yesterday" in err, "a sample record is shown"
    assert "4 records dead-lettered" in err and "in the dead-letter sink" in err
    from lowwater.spark.sinks import read_directory

    assert len(read_directory(dead)) == 4
    assert main(["status", ck]) == 0
    out = capsys.readouterr().out
    assert "dead letters: missing or non-numeric timestamp (ts) x4" in out
    assert "yesterday" in out


def test_a_failed_query_names_its_cause_in_the_first_line(spark: Any, tmp_path: Path) -> None:
    from lowwater.api import ForeachBatchSink, StreamExecutionEnvironment
    from lowwater.core.errors import PipelineError
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.spark.engine import SparkRuntime
    from lowwater.spark.sources import PartitionedLogSource

    log = tmp_path / "log"
    PartitionedLogWriter(log, "jsonl").append(0, _records(0, 12))

    def refuse(rows: list[Any], batch_id: int) -> None:
        raise PermissionError(13, "Permission denied", "/srv/results")

    env = StreamExecutionEnvironment()
    (env.from_source(PartitionedLogSource(log, [("user", "STRING"), ("ts", "BIGINT"), ("n", "BIGINT")]),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("user").window(TumblingEventTimeWindows.of(10_000)).sum("n").add_sink(ForeachBatchSink(refuse)))
    with pytest.raises(PipelineError) as failed:
        SparkRuntime(str(tmp_path / "ck"), spark=spark).execute(env)
    first = str(failed.value).splitlines()[0]
    assert first.startswith("the streaming query failed: PermissionError: [Errno 13] Permission denied"), first
    assert "Python Proxy" not in first and "STREAM_FAILED" not in first


@pytest.mark.parametrize("fails", [False, True])
def test_lowwater_run_puts_the_sessions_log_level_back(spark: Any, tmp_path: Path, fails: bool,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``lowwater run`` turns Spark's logging off for its run, on the session that is already
    active when ``main`` is called in-process, and then puts the root logger's level back as it
    was (not to a default), also when the run fails."""
    root = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getRootLogger
    was = str(root().getLevel().name())
    spark.sparkContext.setLogLevel("ERROR")  # neither this session's level nor lowwater's default
    py4j = logging.getLogger("py4j")
    py4j_was = py4j.level
    py4j.setLevel(logging.WARNING)  # and py4j's Python logger, which main() silences for its run
    try:
        log = tmp_path / "log"
        PartitionedLogWriter(log, "jsonl").append(0, _records(0, 12))
        p = _pipeline(tmp_path, log, extra=', "path": "nowhere"' if fails else "")  # refused once logging is off
        assert main(["run", p, "--checkpoint", str(tmp_path / "ck")]) == (2 if fails else 0)
        assert ("check path" in capsys.readouterr().err) == fails
        assert str(root().getLevel().name()) == "ERROR"
        assert py4j.level == logging.WARNING
    finally:
        spark.sparkContext.setLogLevel(was)
        py4j.setLevel(py4j_was)


def test_a_connection_the_jvm_closed_leaves_no_traceback_and_other_errors_still_print(
        spark: Any, capfd: pytest.CaptureFixture[str]) -> None:
    """What a Ctrl-C run hit once in CI: the JVM closed the accumulator connection while PySpark's
    server thread polled it, and the server printed an ``EOFError`` traceback."""
    from lowwater.cli import _quiet_closed_accumulator_connection

    server = spark.sparkContext._accumulatorServer
    before = server.handle_error
    _quiet_closed_accumulator_connection(spark)
    try:
        for error in (EOFError(), ValueError("a wrong token")):
            try:
                raise error
            except Exception:
                server.handle_error(None, ("127.0.0.1", 1))
            err = capfd.readouterr().err
            assert ("Traceback" in err) == isinstance(error, ValueError), err
    finally:
        server.handle_error = before


@pytest.mark.parametrize(("trigger", "stop"),
                         [("500 ms", "SIGINT"), ("available_now", "SIGINT"), ("500 ms", "SIGTERM"),
                          ("500 ms", "SIGTERM to the group")])
def test_ctrl_c_stops_the_run_cleanly_without_tracebacks(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        trigger: str, stop: str) -> None:
    """Ctrl-C, and SIGTERM (how a deployment stops a job: it ended the process under the running
    query, with exit code 143, no summary and at times the JVM's RpcEnvStoppedException). SIGTERM
    to the job's whole process group (systemd's default stop signals every process of the unit)
    also ends Spark's JVM: the run said ``error: ... Cannot call methods on a stopped SparkContext``
    (exit 2), or printed py4j's tracebacks (exit 1), where it was stopped (a user probe, session 54).

    While it runs, a second run on its checkpoint is refused, naming it: it re-ran the batch the
    first had not committed, beside it (state, sinks, metrics line), before Spark failed it at its
    next offset log write (a user probe, session 48). Once stopped, its lease is released."""
    import os
    import signal
    import subprocess
    import sys
    import time

    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    for i in range(40 if trigger == "available_now" else 1):  # enough batches to interrupt one
        writer.append(0, _records(10_000 * i, 3))
    p = _pipeline(tmp_path, log, extra=f', "trigger": {trigger!r}')
    lowwater = Path(sys.executable).parent / "lowwater"
    proc = subprocess.Popen([str(lowwater), "run", p, "--checkpoint", str(tmp_path / "ck")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYSPARK_PYTHON": sys.executable, "JDK_JAVA_OPTIONS": JVM_OPTIONS},
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        assert proc.stdout is not None
        for line in proc.stdout:  # interrupt once the query runs, or after the first batch's progress line
            words = line.split()
            if "running until Ctrl-C" in line or (trigger == "available_now" and words and words[0].isdigit()):
                break
            assert time.monotonic() < deadline, "the run did not start"
        once = tmp_path / "once.py"  # the same pipeline, run to the end of what is there
        once.write_text(Path(p).read_text().replace(f', "trigger": {trigger!r}', ""))
        if trigger != "available_now":
            assert main(["run", str(once), "--checkpoint", str(tmp_path / "ck")]) == 2
            refused = capsys.readouterr().err
            assert f"{tmp_path / 'ck'} is in use by run " in refused and f"pid {proc.pid}," in refused, refused
            assert "one run at a time may run on a checkpoint" in refused
        signum = getattr(signal, stop.split()[0])
        if stop.endswith("group"):
            os.killpg(proc.pid, signum)  # the run, its JVM and Spark's Python workers
        else:
            proc.send_signal(signum)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + signum, err[-3000:]
    assert ("interrupted: " if stop == "SIGINT" else "interrupted (SIGTERM): ") + \
        "the checkpoint keeps the progress" in out
    err = _without_cancelled_python_workers(_without_foreign_accumulator_connections(err))
    assert "Traceback" not in err and "py4j" not in err, err[-3000:]
    assert not (tmp_path / "ck" / "lowwater" / "lease.json").exists(), "a run stopped cleanly releases its lease"
    if stop == "SIGTERM":  # and the next run takes the checkpoint
        PartitionedLogWriter(log, "jsonl").append(0, _records(3_000, 3))
        assert main(["run", str(once), "--checkpoint", str(tmp_path / "ck"), "--end-of-input"]) == 0
        from lowwater.spark.sinks import read_directory

        assert sorted((r["window_start"], r["value"]) for r in read_directory(tmp_path / "out")) == [(0, 6)]


def test_only_a_foreign_accumulator_connection_is_taken_out_of_a_run_s_stderr() -> None:
    line = "-" * 40 + "\n"
    foreign = (line + "Exception occurred during processing of request from ('127.0.0.1', 40780)\n"
               "Traceback (most recent call last):\n  File \"socketserver.py\", line 317, in _handle_request_noblock\n"
               "ValueError: The value of the provided token to the AccumulatorServer is not correct.\n" + line)
    other = (line + "Exception occurred during processing of request from ('127.0.0.1', 40781)\n"
             "Traceback (most recent call last):\nEOFError\n" + line)
    assert _without_foreign_accumulator_connections("a\n" + foreign + "b\n") == "a\nb\n"
    assert _without_foreign_accumulator_connections(other + foreign) == other
    assert _without_foreign_accumulator_connections("Traceback (most recent call last):\n") == \
        "Traceback (most recent call last):\n"


def _without_foreign_accumulator_connections(err: str) -> str:
    """``err`` without PySpark's report of a connection to the run's accumulator server that had not
    its token: another process's, not the run's (in CI, the driver JVM of the ``lowwater run`` the
    other worker's Ctrl-C test had just interrupted, still sending a task's updates to the port its
    Python driver had, which this run's server got next). The run's own connections carry its
    token; such a report is no Ctrl-C traceback."""
    import re

    block = re.compile(r"-{40}\nException occurred during processing of request from [^\n]*\n"
                       r"(?:(?!-{40}\n).*\n)*?ValueError: The value of the provided token to the "
                       r"AccumulatorServer is not correct\.\n-{40}\n")
    return block.sub("", err)


def _without_cancelled_python_workers(err: str) -> str:
    """``err`` without PySpark's daemon reporting that a Python worker's socket closed under it
    (``BrokenPipeError`` in ``daemon.py``'s ``worker``): a task the stop cancelled, or an idle
    worker when the JVM exits. Spark's own, on any stop of a query with Python tasks; it printed
    once in CI (session 41). Only frames of ``daemon.py`` are taken out: a traceback of the
    driver's, py4j's or lowwater's still fails the test."""
    import re

    block = re.compile(r"Traceback \(most recent call last\):\n"
                       r"(?:  File \"[^\"\n]*pyspark/daemon\.py\", line \d+, in \w+\n(?:    [^\n]*\n)?)+"
                       r"(?:BrokenPipeError|ConnectionResetError|EOFError)\b[^\n]*\n")
    return block.sub("", err)


def test_only_a_cancelled_python_workers_report_is_taken_out_of_a_run_s_stderr() -> None:
    daemon = ("Traceback (most recent call last):\n"
              "  File \"/v/pyspark/python/lib/pyspark.zip/pyspark/daemon.py\", line 262, in manager\n"
              "  File \"/v/pyspark/python/lib/pyspark.zip/pyspark/daemon.py\", line 95, in worker\n"
              "BrokenPipeError: [Errno 32] Broken pipe\n")
    driver = ("Traceback (most recent call last):\n"
              "  File \"/v/lowwater/cli.py\", line 12, in main\n    run()\n"
              "BrokenPipeError: [Errno 32] Broken pipe\n")
    assert _without_cancelled_python_workers("a\n" + daemon + "b\n") == "a\nb\n"
    assert _without_cancelled_python_workers(driver) == driver
    assert _without_cancelled_python_workers(daemon.replace("BrokenPipeError", "ValueError")) == \
        daemon.replace("BrokenPipeError", "ValueError")


DATAFRAME_PIPELINE = """
from pyspark.sql import SparkSession, functions as F

from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.sinks import DirectorySink
from lowwater.spark.sources import DataFrameSource

def build(env):
    spark = SparkSession.getActiveSession()  # lowwater run's own session
    assert spark is not None, "no active session in build(env)"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC", "not lowwater's session"
    df = (spark.readStream.schema("p INT, o BIGINT, at TIMESTAMP, user STRING, n BIGINT")
          .json({src!r}))
    source = DataFrameSource(df, partition="p", offset="o", timestamp="at")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0)
    (env.from_source(source, strategy).key_by("user").window(TumblingEventTimeWindows.of("10 s")).sum("n")
        .add_sink(DirectorySink({out!r}, "jsonl")))
"""


def test_a_pipeline_file_builds_its_dataframe_source_with_the_runs_session(tmp_path: Path) -> None:
    """``lowwater run`` in a process of its own: build(env) makes its streaming DataFrame with the
    session the run uses (it used to run before any session existed: no DataFrameSource could
    be built in a pipeline file)."""
    import json
    import os
    import subprocess
    import sys

    src = tmp_path / "src"
    src.mkdir()
    rows = [{"p": i % 2, "o": i // 2, "at": f"2026-01-01T00:00:{i:02d}.500Z", "user": "u", "n": 1} for i in range(25)]
    (src / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    p = tmp_path / "p.py"
    p.write_text(textwrap.dedent(DATAFRAME_PIPELINE.format(src=str(src), out=str(out))))
    lowwater = Path(sys.executable).parent / "lowwater"
    done = subprocess.run([str(lowwater), "run", str(p), "--checkpoint", str(tmp_path / "ck"), "--end-of-input"],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable, "JDK_JAVA_OPTIONS": JVM_OPTIONS})
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    from lowwater.spark.sinks import read_directory

    start = 1_767_225_600_000  # 2026-01-01T00:00:00Z: a TIMESTAMP column is event time in milliseconds
    assert sorted((r["window_start"] - start, r["value"]) for r in read_directory(out)) == [
        (0, 10), (10_000, 10), (20_000, 5)]


def test_a_run_on_a_uri_checkpoint_prints_its_batches_and_status_and_plot_read_them(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Hadoop URI checkpoint (``file://`` here; ``hdfs://`` in tests/spark/real/test_hdfs.py)
    has no ``metrics.jsonl`` to tail: ``lowwater run`` used to print no batch line and end with
    "0 batches", and ``lowwater status`` refused the URI as "no such directory"."""
    log = tmp_path / "log"
    PartitionedLogWriter(log, "jsonl").append(0, _records(0, 20))
    ck = (tmp_path / "ck").as_uri()  # file:///...
    # RUNTIME_OPTIONS' on_metrics still gets every line beside the run's own printing
    reported = tmp_path / "reported.txt"
    extra = f', "on_metrics": lambda line: open({str(reported)!r}, "a").write(str(line["batch_id"]) + "\\n")'
    assert main(["run", _pipeline(tmp_path, log, extra=extra), "--checkpoint", ck, "--end-of-input"]) == 0
    out = capsys.readouterr().out
    batch_lines = [x for x in out.splitlines() if re.match(r"\s+\d+\*?\s", x)]
    assert len(batch_lines) >= 2, out  # a data batch and the end-of-input step
    assert reported.read_text().split() == [str(i) for i in range(len(batch_lines))]
    assert f"{len(batch_lines)} batches on the native path" in out
    assert "lowwater/metrics.jsonl" not in out and f"metrics: {ck}/lowwater/batches" in out
    assert not (tmp_path / "ck" / "lowwater" / "metrics.jsonl").exists()
    assert main(["status", ck]) == 0
    status = capsys.readouterr().out
    assert "20 rows in = 20 windowed + 0 late + 0 dead-lettered (balanced)" in status
    assert main(["plot", ck, "-o", str(tmp_path / "w.svg")]) == 0
    assert (tmp_path / "w.svg").stat().st_size > 0


TWO_OPERATORS = """
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.sources import PartitionedLogSource

RUNTIME_OPTIONS = {{"clock": lambda b: 1_000 * b}}

def build(env):
    source = PartitionedLogSource({log!r}, [("user", "STRING"), ("ts", "BIGINT"), ("n", "BIGINT")],
                                  max_files_per_trigger=1)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    tens = (env.from_source(source, strategy).key_by("user").window(TumblingEventTimeWindows.of(10_000))
            .allowed_lateness(60_000).sum("n"))
    tens.key_by("key").window(TumblingEventTimeWindows.of(30_000)).sum("value").print()
"""


def test_status_of_a_job_with_two_window_operators_shows_each_ones_late_rows_and_accounting(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the general path, from a URI checkpoint's batch records: the second window operator's
    late rows were counted nowhere status showed."""
    log = tmp_path / "log"
    writer = PartitionedLogWriter(log, "jsonl")
    writer.append(0, [*_records(0, 3), {"user": "u", "ts": 40_000, "n": 1}])  # 0, 1, 2 s and 40 s
    writer.append(0, [{"user": "u", "ts": 5_000, "n": 1}])  # late for [0, 10 s) but allowed: fires it again
    ck = (tmp_path / "ck").as_uri()
    p = tmp_path / "p.py"
    p.write_text(textwrap.dedent(TWO_OPERATORS.format(log=str(log))))
    assert main(["run", str(p), "--checkpoint", ck, "--end-of-input"]) == 0
    ran = capsys.readouterr().out
    assert "batches on the general path" in ran
    assert ("2 operators (the lines above are the first one's): window aggregate#1: 0 late, 3 fired; "
            "window aggregate#2: 1 late, 2 fired") in ran.splitlines()
    assert main(["status", ck]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index("operators (2; above, rows in and dead letters are the job's, the rest the first one's):")
    # the second gets the first's 3 results ([0, 10 s) twice, [40 s, 50 s) at the end of input); the
    # re-firing of [0, 10 s) is late for its [0, 30 s), which fired at the watermark 39999
    assert [x.split()[2:] for x in out[at + 2:at + 4]] == [["39999", "5", "5", "0", "0", "3", "0", "balanced"],
                                                           ["39999", "3", "2", "1", "0", "2", "0", "balanced"]]
    # the same through the API: a job of several window operators names the one it means
    import importlib.util

    from lowwater.api import StreamExecutionEnvironment
    from lowwater.spark.engine import SparkRuntime

    spec = importlib.util.spec_from_file_location("two_operators", p)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    env = StreamExecutionEnvironment()
    module.build(env)
    job = SparkRuntime(ck, spark=spark).execute(env)  # resumes: nothing new to read
    with pytest.raises(ValueError, match=r"name one of the window operators: \['window aggregate#1', 'window agg"):
        job.accounting()
    second = job.accounting("window aggregate#2")
    assert (second.rows_in, second.rows_windowed, second.rows_late, second.balanced) == (3, 2, 1, True)
    with pytest.raises(ValueError, match="no window operator 'window'"):
        job.accounting("window")


def test_on_metrics_gets_every_batchs_line_and_its_failure_does_not_fail_the_job(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from lowwater.api import StreamExecutionEnvironment
    from lowwater.core.errors import ConfigurationError
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.spark.engine import SparkRuntime
    from lowwater.spark.sources import PartitionedLogSource

    log = tmp_path / "log"
    PartitionedLogWriter(log, "jsonl").append(0, _records(0, 20))
    env = StreamExecutionEnvironment()
    (env.from_source(PartitionedLogSource(str(log), [("user", "STRING"), ("ts", "BIGINT"), ("n", "BIGINT")]),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("user").window(TumblingEventTimeWindows.of(10_000)).sum("n").collect())
    seen: list[dict[str, Any]] = []

    def report(line: dict[str, Any]) -> None:
        seen.append(line)
        raise RuntimeError("the dashboard is down")

    with caplog.at_level(logging.WARNING, logger="lowwater"):
        job = SparkRuntime(str(tmp_path / "ck"), spark=spark, end_of_input=True, on_metrics=report).execute(env)
    assert seen and seen == job.metrics()
    assert sum(x["rows_in"] for x in seen) == 20
    assert "on_metrics raised RuntimeError: the dashboard is down" in caplog.text
    with pytest.raises(ConfigurationError, match="on_metrics"):
        SparkRuntime(str(tmp_path / "ck2"), on_metrics="print")  # type: ignore[arg-type]


POSTGRES_PIPELINE = """
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.sinks import PostgresSink
from lowwater.spark.sources import PartitionedLogSource

RUNTIME_OPTIONS = {{"clock": lambda b: 1000 * b}}


def build(env):
    source = PartitionedLogSource({log!r}, [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")])
    (env.from_source(source, WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").window(TumblingEventTimeWindows.of(10_000)).sum("value")
     .add_sink(PostgresSink({url!r}, "cli_totals", user={user!r})))
"""


def test_lowwater_run_writes_a_pipeline_files_postgres_sink(spark: Any, pg: Any, tmp_path: Path) -> None:
    """``lowwater run`` in a process of its own, with a PostgresSink: the run's session has the
    installed JDBC driver. A pipeline file cannot give its session jars (build() runs in it), and
    the run failed in its first batch, after the batch's other writes, naming a fix it could not take."""
    import os
    import subprocess
    import sys

    from lowwater.spark.sinks.postgres import query_rows

    log = tmp_path / "log"
    PartitionedLogWriter(log, "jsonl").append(0, [{"key": "a", "ts": 1000, "value": 2},
                                                  {"key": "a", "ts": 3000, "value": 3}])
    p = tmp_path / "p.py"
    p.write_text(textwrap.dedent(POSTGRES_PIPELINE.format(log=str(log), url=pg.jdbc_url, user=pg.user)))
    lowwater = Path(sys.executable).parent / "lowwater"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "JDK_JAVA_OPTIONS": JVM_OPTIONS}
    if pg.jdbc_jar:
        env["LOWWATER_POSTGRES_JDBC_JAR"] = pg.jdbc_jar
    done = subprocess.run([str(lowwater), "run", str(p), "--checkpoint", str(tmp_path / "ck"), "--end-of-input"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    rows = query_rows(spark, pg.jdbc_url, "SELECT key, window_start, value FROM cli_totals", pg.user)
    assert [tuple(r) for r in rows] == [("a", 0, 5)]


def test_status_of_a_checkpoint_on_an_hdfs_that_does_not_answer_says_so_with_a_hint(
    spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """It printed Hadoop's ``java.net.ConnectException ... Connection refused`` and, as its hint, only
    ``run with --verbose``."""
    assert main(["status", "hdfs://127.0.0.1:1/ck"]) == 2
    err = capsys.readouterr().err
    assert "Connection refused" in err and "hint: a service the job reads or writes did not answer" in err, err
    assert "is HDFS running" in err and "--verbose" not in err


def test_status_on_a_uri_starts_no_web_ui(tmp_path: Path) -> None:
    """Reading a checkpoint through Spark needs no web UI: beside a running job, whose UI has port
    4040, status printed Spark's "Service 'SparkUI' could not bind on port 4040" first."""
    import contextlib
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with contextlib.suppress(OSError):  # a UI of something else has it already: as good
            taken.bind(("0.0.0.0", 4040))
        taken.listen()
        got = subprocess.run([sys.executable, "-m", "lowwater.cli", "status", "hdfs://127.0.0.1:1/ck"],
                             capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert got.returncode == 2 and "lowwater: error:" in got.stderr, got.stderr
    assert "SparkUI" not in got.stderr, got.stderr


def test_logging_comes_back_only_once_a_stopped_runs_tasks_have_ended(spark: Any) -> None:
    """A run stopped in the middle of a write cancels its job at once, but its tasks end later,
    each logging its cancellation with a stack (about 80 lines after "interrupted") once the log
    level was back: the CLI waits for them first."""
    import contextlib
    import threading
    import time

    from lowwater.cli import _running_tasks, _wait_for_tasks

    def slow(rows: Any) -> Any:
        import time as t

        started = t.time()
        while t.time() - started < 4:  # busy, as a write is: a sleep ends at the kill
            sum(range(100_000))
        return rows

    def run() -> None:
        with contextlib.suppress(Exception):  # cancelled
            spark.sparkContext.parallelize([1], 1).mapPartitions(slow).collect()

    job = threading.Thread(target=run)
    job.start()
    deadline = time.monotonic() + 60
    while not _running_tasks(spark):
        assert time.monotonic() < deadline, "the task did not start"
        time.sleep(0.05)
    time.sleep(1)  # inside the function
    spark.sparkContext.cancelAllJobs()  # as a stop in the middle of a batch does
    cancelled = time.monotonic()
    _wait_for_tasks(spark, timeout_s=60)
    assert _running_tasks(spark) == 0
    assert time.monotonic() - cancelled > 1, "returned before the cancelled task had ended"
    job.join(30)

