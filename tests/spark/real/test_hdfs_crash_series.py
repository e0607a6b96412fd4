"""The seeded SIGKILL crash series with the whole checkpoint on HDFS, Spark's and lowwater's.

It reuses tests/spark/crash_series.py unchanged except where the checkpoint lives: every run
of crash_job.py gets ``hdfs://127.0.0.1:<port>/crash/<name>/ck``, and the checks that read the
checkpoint (the metrics, the batches done) read lowwater's batch records through the same URI
(an object store or HDFS has no appendable ``metrics.jsonl``; the lines are rebuilt from the
batch records, as ``SparkJob.metrics()`` does).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lowwater.observe.metrics import MetricsLog, lines_from_records
from lowwater.spark.state import StateStore
from tests.spark.crash_series import JOB, RUN_TIMEOUT_S, Run, Series, _kill_group

pytestmark = pytest.mark.spark


class HdfsSeries(Series):
    hdfs_uri: str = ""

    def _lines(self, name: str) -> list[dict[str, Any]]:
        if name == "clean":
            return MetricsLog(self.checkpoint(name)).read()
        store = StateStore(self.checkpoint(name), spark=self.spark)
        return lines_from_records(list(store.batch_records()))

    def checkpoint(self, name: str) -> str:
        if name == "clean":  # the uninterrupted reference run stays local: prepare() reads it as files
            return str(self.workdir / name / "ck")
        return f"{self.hdfs_uri}/crash/{name}/ck"

    def run(self, name: str, label: str, fault: str | None = None, kill_after_s: float | None = None) -> Run:
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "JDK_JAVA_OPTIONS": self.jvm_options}
        env.pop("LOWWATER_FAULT", None)
        if fault:
            env["LOWWATER_FAULT"] = fault
        argv = [sys.executable, str(JOB), str(self.input), self.checkpoint(name), str(self.workdir / name / "out"),
                self.path, "--jdbc-url", self.pg.jdbc_url, "--table", name, "--user", self.pg.user]
        log = self.log_dir / f"{label}.log"
        started = time.monotonic()
        killed = False
        with open(log, "w") as out:
            proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                    cwd=str(self.workdir))
            try:
                try:
                    proc.wait(timeout=kill_after_s if kill_after_s is not None else RUN_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    if kill_after_s is None:
                        raise
                    killed = proc.poll() is None
                    _kill_group(proc.pid)
                    proc.wait(timeout=60)
            finally:
                _kill_group(proc.pid)
        return Run(proc.returncode, round(time.monotonic() - started, 2), str(log), killed)

    def accounting(self, name: str, late_rows: int) -> dict[str, Any]:
        lines = self._lines(name)
        rows_in = sum(int(m["rows_in"]) for m in lines)
        rows_late = sum(int(m["rows_late"]) for m in lines)
        return {"rows_in": rows_in, "rows_late": rows_late, "batches": len(lines),
                "ok": rows_in == self.records and rows_late == late_rows}

    def batches_done(self, name: str) -> int:
        return len(self._lines(name))


# CI runs seed 1 (about 4 minutes on a quiet 2-core machine); LOWWATER_HDFS_CRASH_SEEDS=1,2 runs both
# (both passed when this test joined the suite: 2 passed in 548 s on a loaded machine)
SEEDS = [int(s) for s in os.environ.get("LOWWATER_HDFS_CRASH_SEEDS", "1").split(",") if s.strip()]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_crash_series_with_the_checkpoint_on_hdfs(spark: Any, hdfs: Any, pg: Any, tmp_path_factory: Any,
                                                     seed: int) -> None:
    series = HdfsSeries(tmp_path_factory.mktemp("hdfs-crash"), pg, spark=spark)  # the reference in the session
    series.hdfs_uri = hdfs.uri
    record = series.run_seed(seed)
    assert record["ok"], json.dumps(record, indent=1, default=str)
    assert any(k.get("landed") for k in record["kills"]) or record["kills"][0]["kind"] == "time"
    assert Path(series.log_dir).exists() and signal.SIGKILL
