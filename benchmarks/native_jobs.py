"""The Spark jobs of a native micro-batch: how many, how long, and the rest of the batch.

    .venv/bin/python benchmarks/native_jobs.py [--engine lowwater|spark] [--keys 10000] [--rows 100000] [--batches 4]

Runs one engine (``scale.py``'s pipelines: tumbling 1-minute windows, 10 s of event time per
batch, sum, ``noop`` results) in this process and then reads Spark's REST API
(``uiWebUrl/api/v1/applications/<id>/jobs`` and ``/stages``): per micro-batch, the jobs
(grouped by the ``batch = N`` line Spark's stream execution puts in every job description)
with their wall time and executor run time, and Spark's progress phases (``durationMs``).
Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url) as r:  # the local Spark UI
        return json.loads(r.read())


def _ms(a: str, b: str) -> float:
    import datetime as dt

    f = "%Y-%m-%dT%H:%M:%S.%f%Z"
    return (dt.datetime.strptime(b.replace("GMT", "UTC"), f) - dt.datetime.strptime(a.replace("GMT", "UTC"), f)
            ).total_seconds() * 1000


def jobs_by_batch(spark: Any) -> dict[int, list[dict[str, Any]]]:
    sc = spark.sparkContext
    base = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    stages = {s["stageId"]: s for s in _get(f"{base}/stages?status=complete")}
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for j in sorted(_get(f"{base}/jobs"), key=lambda j: j["jobId"]):
        m = re.search(r"batch = (\d+)", j.get("description") or "")
        if m is None or "completionTime" not in j:
            continue
        run = sum(stages[s].get("executorRunTime", 0) for s in j["stageIds"] if s in stages)
        cpu = sum(stages[s].get("executorCpuTime", 0) for s in j["stageIds"] if s in stages) / 1e6
        out[int(m.group(1))].append({"job": j["jobId"], "name": j["name"][:60], "ms": round(_ms(j["submissionTime"],
                                     j["completionTime"])), "stages": len(j["stageIds"]) - j.get("numSkippedStages", 0),
                                     "tasks": j["numTasks"] - j.get("numSkippedTasks", 0),
                                     "executor_run_ms": run, "executor_cpu_ms": round(cpu)})
    return out


PHASES: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
CURRENT = [-1]


def install_phase_timers() -> None:
    """Wall time per batch of the driver-side pieces of a lowwater batch (wrapped, not changed)."""
    import time

    from lowwater.spark import engine

    def wrap(owner: Any, attr: str, phase: str) -> None:
        original = getattr(owner, attr)

        def wrapped(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return original(*a, **kw)
            finally:
                PHASES[CURRENT[0]][phase] += (time.perf_counter() - t) * 1000

        setattr(owner, attr, wrapped)

    on_batch = engine._BatchDriver.on_batch

    def timed_on_batch(self: Any, df: Any, batch_id: int) -> None:
        CURRENT[0] = batch_id
        t = time.perf_counter()
        on_batch(self, df, batch_id)
        PHASES[batch_id]["foreach_batch"] = (time.perf_counter() - t) * 1000

    engine._BatchDriver.on_batch = timed_on_batch
    for owner, attr in timed():
        wrap(owner, attr, f"{getattr(owner, '__name__', owner)}.{attr}".split(".")[-2] + "." + attr)


def timed() -> list[tuple[Any, str]]:
    """``(owner, attribute)`` for each function :func:`install_phase_timers` wraps
    (``tests/test_benchmarks.py`` checks that each still exists)."""
    from pyspark.sql.classic.dataframe import DataFrame

    from lowwater.spark import engine, native, state, window_store

    return [(native.NativeProcessor, "run"), (native.NativeProcessor, "_write_partials"),
            (native.NativeProcessor, "_fires"), (native.NativeProcessor, "_late_fires"),
            (window_store.WindowStore, "append"), (window_store.WindowStore, "read"),
            (window_store.WindowStore, "delete"), (state.StateStore, "commit_json"),
            (state.StateStore, "load_json"), (state.StateStore, "write_batch_record"),
            (state.StateStore, "batch_record"), (state.StateStore, "size_bytes"),
            (state.StateStore, "end_of_input"), (state.StateStore, "forget_batch_record"),
            (engine, "_deliver"), (engine, "_dead_summary"),
            (DataFrame, "collect"), (DataFrame, "count"), (DataFrame, "persist")]


def main(argv: list[str] | None = None) -> int:
    import harness as H

    from lowwater.spark.session import get_or_create_session

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", default="lowwater")
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=4)
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="lowwater-jobs-"))
    try:
        H.write_log(work / "log", H.stream_for(4, args.keys, args.rows, 10_000, 2_000), args.batches, args.rows)
        spark = get_or_create_session(master="local[2]", app_name="native-jobs",
                                      conf={"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g",
                                            "spark.ui.enabled": "true"})
        if args.engine != "spark":
            install_phase_timers()
        if args.engine == "spark":
            _, progress, _ = H.spark_native(spark, work / "log", work / "ck", 4, 60_000, 2_000)
        else:
            _, _, progress, _ = H.lowwater(spark, work / "log", work / "ck", 4, 60_000, 2_000)
        jobs = jobs_by_batch(spark)
        batches = []
        for p in progress:
            p = p if isinstance(p, dict) else json.loads(p.json)
            if not p.get("numInputRows"):
                continue
            b = int(p["batchId"])
            js = jobs.get(b, [])
            batches.append({"batch": b, "rows": p["numInputRows"], "durationMs": p["durationMs"], "jobs": js,
                            "driver_phases_ms": {k: round(v) for k, v in PHASES.get(b, {}).items()},
                            "jobs_ms": sum(j["ms"] for j in js),
                            "executor_cpu_ms": sum(j["executor_cpu_ms"] for j in js)})
        steady = batches[1:] or batches
        print(json.dumps({"engine": args.engine, "keys": args.keys, "rows": args.rows, "load": os.getloadavg(),
                          "median_trigger_ms": statistics.median(b["durationMs"]["triggerExecution"] for b in steady),
                          "median_jobs": statistics.median(len(b["jobs"]) for b in steady),
                          "batches": batches}, indent=1))
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
