"""SIGKILL and restart, reading a real Kafka topic, into PostgreSQL and Delta: exactly once.

The job (kafka_crash_job.py, a fresh process each run) is killed twice at named points
(lowwater.spark.faults): once after the Delta sink wrote a batch and before PostgreSQL did,
once after both wrote and before Spark committed the batch. While it is down, more records
are produced. The restart resumes from the Kafka offsets in Spark's checkpoint and ends the
input. Each partition's timestamps only grow, so nothing is late whatever the batch
boundaries: every window fires once, with its full sum, computed here from what was produced.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from lowwater.observe.metrics import MetricsLog
from lowwater.spark.sinks import read_directory
from tests.kafka_server import KafkaBroker, new_topic, produce
from tests.spark.crash_series import JVM_OPTIONS

pytestmark = pytest.mark.spark

JOB = Path(__file__).with_name("kafka_crash_job.py")
KEYS = ["k0", "k1", "k2", "k3", "k4"]


def _records(first: int, last: int) -> list[tuple[int, dict[str, Any], None]]:
    """Records first..last-1 of each of 3 partitions; partition 2 runs 3 s behind."""
    out = []
    for i in range(first, last):
        for p in range(3):
            ts = 5_000 + i * 100 + p * 7 - (3_000 if p == 2 else 0)
            out.append((p, {"key": KEYS[(i + p) % len(KEYS)], "ts": ts, "value": i * 3 + p + 1}, None))
    return out


def _run(argv: list[str], fault: str | None, log: Path) -> int:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "JDK_JAVA_OPTIONS": JVM_OPTIONS}
    env.pop("LOWWATER_FAULT", None)
    if fault:
        env["LOWWATER_FAULT"] = fault
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(JOB), *argv], env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            return proc.wait(timeout=900)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the JVM outlives a driver that killed itself


def test_kills_and_restart_from_kafka_offsets_are_exactly_once(spark: Any, kafka: KafkaBroker, pg: Any,
                                                               tmp_path: Path) -> None:
    topic = new_topic(kafka, "crash", 3)
    table = "kafka_crash"
    ck, delta = tmp_path / "ck", tmp_path / "delta"
    argv = [kafka.bootstrap_servers, topic, str(ck), str(delta), pg.jdbc_url, table, pg.user]
    first, second = _records(0, 40), _records(40, 60)
    produce(kafka, topic, first)

    for i, fault in enumerate(["1:after_first_sink", "3:after_sinks"]):
        log = tmp_path / f"kill{i}.log"
        code = _run(argv, fault, log)
        text = log.read_text(errors="replace")
        batch, point = fault.split(":")
        assert code == -signal.SIGKILL and f"killing the driver at batch {batch}, {point}" in text, text[-3000:]
    produce(kafka, topic, second)  # while the job is down
    log = tmp_path / "restart.log"
    assert _run([*argv, "--end"], None, log) == 0, log.read_text(errors="replace")[-3000:]

    expected: dict[tuple[str, int], float] = defaultdict(float)
    for _p, e, _ts in first + second:
        expected[(e["key"], e["ts"] - e["ts"] % 2000)] += e["value"]
    want = sorted((k, w, v, 0) for (k, w), v in expected.items())

    delta_rows = sorted((r.key, r.window_start, r.value, r.fire_index)
                        for r in spark.read.format("delta").load(str(delta)).collect())
    assert delta_rows == want  # no window twice, none missing, each with its full sum

    pg_rows = sorted((k, int(w), float(v), int(f)) for k, w, v, f in (
        line.split("|") for line in _psql(pg, f"SELECT key, window_start, value, fire_index FROM {table}")))
    assert pg_rows == want
    assert not _psql(pg, f"SELECT tablename FROM pg_tables WHERE tablename ~ '^{table}__stage_[0-9]+$'")

    metrics = MetricsLog(ck).read()  # a replayed batch's line counts once
    assert sum(int(m["rows_in"]) for m in metrics) == len(first) + len(second)
    assert sum(int(m["rows_late"]) for m in metrics) == 0
    assert read_directory(Path(f"{ck}-late")) == []


def _psql(pg: Any, sql: str) -> list[str]:
    from tests.pg_server import find_pg_bin

    proc = subprocess.run([os.path.join(find_pg_bin(), "psql"), "-X", "-q", "-A", "-t", "-h", pg.host, "-p",
                           str(pg.port), "-U", pg.user, "-d", pg.database, "-c", sql],
                          capture_output=True, text=True, timeout=60, check=True)
    return [line for line in proc.stdout.splitlines() if line]
