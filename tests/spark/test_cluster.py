"""A native-path pipeline (through ``lowwater run``) and a keyed-path one (``cluster_job.py``) on a
Spark standalone cluster (one master, one worker, 1 core each, on 127.0.0.1), submitted with
``spark-submit``, equal the same jobs run locally (in-process, on the test session's local master).

The master, the worker and the application's JVMs run C1 only with the serial GC
(``crash_series.JVM_OPTIONS``): the JIT has no part in what is tested."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lowwater.io import PartitionedLogWriter, SyntheticStream

pytestmark = pytest.mark.spark

JOB = Path(__file__).with_name("cluster_job.py")

try:
    from tests.spark.cluster_job import run, write_kafka_frames
    from tests.spark.crash_series import JVM_OPTIONS
except ImportError:  # tests/spark on sys.path
    from cluster_job import run, write_kafka_frames  # type: ignore[no-redef]
    from crash_series import JVM_OPTIONS  # type: ignore[no-redef]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(_spark_home()), "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_NO_DAEMONIZE": "1", "SPARK_DAEMON_JAVA_OPTS": JVM_OPTIONS}


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}: {log.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"port {port} did not open: {log.read_text()[-2000:]}")


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as f:
        return subprocess.Popen([str(_spark_home() / "bin" / "spark-class"), *args], stdout=f, stderr=subprocess.STDOUT,
                                env=_env(), start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``spark://127.0.0.1:<port>``: a master and one worker with 1 core and 1 GB."""
    work = tmp_path_factory.mktemp("cluster")
    port, ui = _free_port(), _free_port()
    master = _start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                     "--webui-port", str(ui)], work / "master.log")
    worker = None
    try:
        _wait_for_port(port, master, work / "master.log")
        url = f"spark://127.0.0.1:{port}"
        worker_port = _free_port()
        worker = _start(["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--port",
                         str(worker_port), "--webui-port", str(_free_port()), "--cores", "1", "--memory", "1g",
                         "--work-dir", str(work / "worker")], work / "worker.log")
        _wait_for_port(worker_port, worker, work / "worker.log")
        deadline = time.monotonic() + 120
        while "Successfully registered with master" not in (work / "worker.log").read_text():
            if time.monotonic() > deadline:
                raise TimeoutError((work / "worker.log").read_text()[-2000:])
            time.sleep(0.5)
        yield url
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)


def _submit(master: str, *args: str | Path) -> str:
    cmd = [str(_spark_home() / "bin" / "spark-submit"), "--master", master, "--conf", "spark.cores.max=1",
           "--conf", "spark.executor.cores=1", "--conf", "spark.executor.memory=512m", "--conf",
           "spark.driver.host=127.0.0.1", "--conf", "spark.ui.enabled=false",
           "--conf", f"spark.driver.extraJavaOptions={JVM_OPTIONS}",
           "--conf", f"spark.executor.extraJavaOptions={JVM_OPTIONS}", *map(str, args)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=_env(),
                         cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 0, run.stderr[-4000:]
    return run.stdout


def _rows(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    df = spark.read.parquet(str(path / "batch=*"))
    return sorted(tuple(r) for r in df.drop("window").collect())


def test_a_keyed_path_pipeline_on_a_standalone_cluster_equals_the_local_run(
        cluster: str, spark: Any, tmp_path: Path) -> None:
    """cluster_job.py's ``sessions`` pipeline: session windows on a Python key selector, per key on
    the executors (the keyed path), and its ``kafka`` one: Kafka-shaped records read by
    ``KafkaShapedSource`` with lowwater's own jar given to ``spark-submit``, so that its reader runs
    on the cluster's executor. Its ``native`` pipeline runs on the cluster in the test below,
    through ``lowwater run``: submitting it here too took about 30 s of CI's time."""
    from lowwater.spark.jvm import jars_dir
    from lowwater.spark.kafka_value import JAR_NAME

    log = tmp_path / "log"
    stream = SyntheticStream(partitions=3, keys=20, events_per_second=500, disorder_ms=800, lagging_partition=2,
                             lag_ms=3000, late_fraction=0.02, late_by_ms=4000, seed=7)
    stream.write_to(PartitionedLogWriter(log, "jsonl"), batches=4, rows_per_batch=300)
    bad = write_kafka_frames(str(log), f"{log}-kafka")
    assert bad >= 10

    kinds = "sessions,kafka"
    on_cluster = _submit(cluster, "--jars", jars_dir() / "spark" / JAR_NAME, JOB, log, tmp_path / "ck-cluster",
                         tmp_path / "out-cluster", kinds)
    assert f"MASTER {cluster}" in on_cluster
    assert "kafka READER on" in on_cluster
    local = {kind: run(spark, str(log), str(tmp_path / "ck-local" / kind), str(tmp_path / "out-local" / kind), kind)
             for kind in kinds.split(",")}  # the local run in-process, on the test session's local master

    for kind, path in (("sessions", "keyed"), ("kafka", "native")):
        assert f"{kind} PATH {path}" in on_cluster
        results = _rows(spark, tmp_path / "out-cluster" / kind / "results")
        assert results and results == _rows(spark, tmp_path / "out-local" / kind / "results"), kind
        late = _rows(spark, tmp_path / "out-cluster" / kind / "late")
        assert late and late == _rows(spark, tmp_path / "out-local" / kind / "late"), kind
        assert local[kind][0] == path
        accounting = [line for line in on_cluster.splitlines() if line.startswith(f"{kind} ACCOUNTING")]
        assert accounting == [f"{kind} ACCOUNTING {local[kind][1]}"]
        assert "UNACCOUNTED" not in accounting[0]
    assert f"+ {bad} dead-lettered" in local["kafka"][1]


PIPELINE = """\
from lowwater.api import OutputTag
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.sinks import DirectorySink
from lowwater.spark.sources import PartitionedLogSource

RUNTIME_OPTIONS = {{"path": "native"}}


def build(env):
    late = OutputTag("late")
    result = (
        env.from_source(PartitionedLogSource({log!r}, [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")],
                                             max_files_per_trigger=2),
                        WatermarkStrategy.for_bounded_out_of_orderness(500).with_timestamp_assigner("ts"))
        .key_by("key").window(TumblingEventTimeWindows.of(2000))
        .allowed_lateness(1000).side_output_late_data(late).sum("value")
    )
    result.add_sink(DirectorySink({out!r} + "/results", "parquet"))
    result.get_side_output(late).add_sink(DirectorySink({out!r} + "/late", "parquet"))
"""


def test_lowwater_run_given_to_spark_submit_runs_a_pipeline_file_on_the_cluster(
        cluster: str, spark: Any, tmp_path: Path) -> None:
    """What ``lowwater run --help`` says to do on a cluster: its module's file, given to
    ``spark-submit`` with ``run PIPELINE.py`` and a checkpoint, runs the pipeline on the cluster's
    executors; the outputs equal cluster_job.py's native pipeline (the same pipeline) run locally."""
    import lowwater.cli

    log = tmp_path / "log"
    SyntheticStream(partitions=3, keys=20, events_per_second=500, disorder_ms=800, lagging_partition=2, lag_ms=3000,
                    late_fraction=0.02, late_by_ms=4000, seed=11).write_to(PartitionedLogWriter(log, "jsonl"),
                                                                          batches=4, rows_per_batch=300)
    out = tmp_path / "out-cluster"
    pipeline = tmp_path / "pipeline.py"
    pipeline.write_text(PIPELINE.format(log=str(log), out=str(out)))
    assert str(Path(lowwater.cli.__file__).resolve()) in _help("run")

    printed = _submit(cluster, Path(lowwater.cli.__file__).resolve(), "run", pipeline,
                      "--checkpoint", (tmp_path / "ck-cluster").as_uri(), "--end-of-input")
    batches = [x for x in printed.splitlines() if re.match(r"\s+\d+\*?\s", x)]  # one line per batch
    assert batches and f"{len(batches)} batches on the native path" in printed, printed[-3000:]
    local = run(spark, str(log), str(tmp_path / "ck-local"), str(tmp_path / "out-local"), "native")
    assert local[0] == "native"
    for output in ("results", "late"):
        rows = _rows(spark, out / output)
        assert rows and rows == _rows(spark, tmp_path / "out-local" / output), output
    # every record read accounted for on the cluster as in the local run: the totals its last state holds
    on_cluster = _totals(tmp_path / "ck-cluster")
    assert on_cluster == _totals(tmp_path / "ck-local") and on_cluster["rows_in"] == 1_200
    assert on_cluster["rows_in"] == on_cluster["rows_windowed"] + on_cluster["rows_late"] + on_cluster["rows_dead"]


def _totals(checkpoint: Path) -> dict[str, Any]:
    from lowwater.spark.state import StateStore

    store = StateStore(checkpoint)
    version = store.latest_version()
    assert version is not None, f"no state committed under {checkpoint}"
    return dict(store.load_json(version)["totals"])


def _help(command: str) -> str:
    import contextlib
    import io

    from lowwater.cli import main

    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
        main([command, "--help"])
    return text.getvalue()


def _can_unshare() -> bool:
    try:
        return subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_a_local_checkpoint_or_sink_the_clusters_executors_do_not_share_is_refused(tmp_path: Path) -> None:
    """A checkpoint, then a DirectorySink's path, on the driver's local disk, on a cluster whose
    executor has a disk of its own (its worker runs in a mount namespace of its own, with a private
    tmpfs over the directory: what two machines' local directories are). The keyed path's executors
    wrote its state there, the driver read none of it back, and the run ended with wrong results
    that balanced (a user probe, session 61); a sink's batches held no rows. Now the job is refused
    before its first batch, saying why and what to do, and leaves nothing behind."""
    if not _can_unshare():
        pytest.skip("needs unshare -m (root) to give the worker a disk of its own")
    import lowwater.cli

    log = tmp_path / "log"
    SyntheticStream(partitions=2, keys=5, events_per_second=500, disorder_ms=0, seed=3).write_to(
        PartitionedLogWriter(log, "jsonl"), batches=2, rows_per_batch=50)
    private = tmp_path / "disk"  # the driver's; the worker sees an empty tmpfs there
    private.mkdir()
    port = _free_port()
    master = _start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                     "--webui-port", str(_free_port())], tmp_path / "master.log")
    worker = None
    runs = {}
    try:
        _wait_for_port(port, master, tmp_path / "master.log")
        url = f"spark://127.0.0.1:{port}"
        script = (f"mount -t tmpfs tmpfs {private} && exec {_spark_home() / 'bin' / 'spark-class'} "
                  f"org.apache.spark.deploy.worker.Worker {url} --host 127.0.0.1 --webui-port {_free_port()} "
                  f"--cores 1 --memory 1g --work-dir {tmp_path / 'worker'}")
        with open(tmp_path / "worker.log", "wb") as f:
            worker = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script], stdout=f,
                                      stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
        deadline = time.monotonic() + 120
        while "Successfully registered with master" not in (tmp_path / "worker.log").read_text():
            assert worker.poll() is None and time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-2000:]
            time.sleep(0.5)
        for case, checkpoint, out in (("checkpoint", private / "ck", tmp_path / "out"),
                                      ("path", tmp_path / "ck", private / "out")):
            pipeline = tmp_path / f"pipeline-{case}.py"
            pipeline.write_text(PIPELINE.format(log=str(log), out=str(out)).replace('"native"', '"keyed"'))
            cmd = [str(_spark_home() / "bin" / "spark-submit"), "--master", url, "--conf", "spark.cores.max=1",
                   "--conf", "spark.executor.memory=512m", "--conf", "spark.driver.host=127.0.0.1",
                   "--conf", "spark.ui.enabled=false", "--conf", f"spark.driver.extraJavaOptions={JVM_OPTIONS}",
                   "--conf", f"spark.executor.extraJavaOptions={JVM_OPTIONS}",
                   str(Path(lowwater.cli.__file__).resolve()), "run", str(pipeline), "--checkpoint", str(checkpoint)]
            runs[case] = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_env(),
                                        cwd=Path(__file__).resolve().parents[2])
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)
    for case, run in runs.items():
        # under spark-submit the CLI's stderr comes out in stdout
        said = [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("lowwater: error:")]
        assert run.returncode == 2, (case, said, run.stdout[-3000:], run.stderr[-3000:])
        assert said and said[0].startswith(f"lowwater: error: {case}: "), (case, said)
        assert "is on the local file system" in said[0] and "this driver sees 0" in said[0], said
        assert "every node shares" in said[0] and "hdfs:" in said[0]
        assert ("check path in build()" in said[0]) == (case == "path"), said  # a sink's path is build()'s
    written = [p for p in private.rglob("*") if p.is_file()]
    assert not written, f"refused before anything was written: {written}"
