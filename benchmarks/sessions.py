"""Session windows: lowwater's keyed path (per key on the executors) against Spark's ``session_window``.

    .venv/bin/python benchmarks/sessions.py [--keys 10000] [--rows 100000] [--batches 5]
                                            [--engines spark,keyed,general]

One Parquet partitioned log (4 partitions, every micro-batch 10 s of event time, 2 s disorder,
``--rows`` rows per batch) per number of keys, run by each engine in a fresh Python process
(``local[2]``; the order alternates between cells):

* ``spark``: ``withWatermark("event_time", "2 seconds").groupBy(session_window(event_time,
  "3 seconds"), key).agg(sum(value))``, append mode, ``noop`` sink;
* ``keyed``: lowwater, event-time session windows with a 3 s gap, bounded out-of-orderness 2 s,
  sum, on the keyed path (the window operator per key on the executors);
* ``general``: the same pipeline on the general path (every record stepped in the driver), for
  comparison with what the keyed path replaces.

Reported as in ``scale.py``: median batch time and CPU time per batch after the first, the
driver's Python peak RSS and the JVM's, the load average. lowwater's results go to
``harness.CountingSink`` (a DataFrame sink that writes to ``noop``, and counts the rows the general
path hands it without a write), or with ``LOWWATER_BENCH_SINK=foreach`` to a
``ForeachDataFrameSink`` whose function writes to ``noop`` (the general path's results then reach
it as a DataFrame, as any DataFrame sink's); ``result_rows`` is the engine's ``windows_fired``.
Writes ``benchmarks/results/sessions-<UTC timestamp>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

GAP_MS = 3_000
SPAN_MS = 10_000
BOUND_MS = 2_000
PARTITIONS = 4



def _spark_sessions(spark: Any, log: Path, ckpt: Path) -> tuple[list[Any], float]:
    import harness as H
    from pyspark.sql import functions as F

    from lowwater.spark.sources import PartitionedLogSource

    src = PartitionedLogSource(log, H.FIELDS, max_files_per_trigger=PARTITIONS)
    df = src.spark_stream(spark).withColumn("event_time", F.timestamp_millis("ts"))
    agg = (df.withWatermark("event_time", f"{BOUND_MS} milliseconds")
           .groupBy(F.session_window("event_time", f"{GAP_MS} milliseconds"), "key").agg(F.sum("value").alias("v")))
    started = time.monotonic()
    q = (agg.writeStream.outputMode("append").format("noop").option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    if q.exception() is not None:
        raise RuntimeError(f"spark session_window query failed: {q.exception()}")
    return list(q.recentProgress), time.monotonic() - started


def _lowwater_sessions(spark: Any, log: Path, ckpt: Path, path: str) -> tuple[list[Any], float, int]:
    import harness as H

    from lowwater.api import StreamExecutionEnvironment
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import EventTimeSessionWindows
    from lowwater.spark.engine import SparkRuntime
    from lowwater.spark.sources import PartitionedLogSource

    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(BOUND_MS).with_timestamp_assigner("ts")
    src = PartitionedLogSource(log, H.FIELDS, max_files_per_trigger=PARTITIONS)
    sink: Any = H.CountingSink()
    if os.environ.get("LOWWATER_BENCH_SINK") == "foreach":  # a plain DataFrame sink: rows reach it as DataFrames
        from lowwater.spark.sinks import ForeachDataFrameSink

        sink = ForeachDataFrameSink(lambda df, _: df.write.format("noop").mode("overwrite").save())
    (env.from_source(src, strategy).key_by("key").window(EventTimeSessionWindows.with_gap(GAP_MS))
     .sum("value").add_sink(sink))
    started = time.monotonic()
    job = SparkRuntime(str(ckpt), spark=spark, path=path).execute(env, f"sessions-{path}")  # type: ignore[arg-type]
    wall = time.monotonic() - started
    assert job.path == path, job.reason
    return list(job.query.recentProgress), wall, sum(int(b["metrics"].get("windows_fired") or 0) for b in job.batches())


def child(engine: str, log: str, ckpt: str) -> dict[str, Any]:
    import harness as H
    from cpu import CpuSampler

    from lowwater.spark.session import get_or_create_session

    spark = get_or_create_session(master="local[2]", app_name=f"sessions-{engine}",
                                  conf={"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g"})
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    fired = None
    with CpuSampler.for_session(spark) as sampler:
        if engine == "spark":
            progress, wall = _spark_sessions(spark, Path(log), Path(ckpt))
        else:
            progress, wall, fired = _lowwater_sessions(spark, Path(log), Path(ckpt), engine)
    times = H.progress_times(progress, sampler)
    out = {**H.summarize(times), "wall_s": round(wall, 1), "result_rows": fired,
           # VmHWM of this process: ru_maxrss would carry over the parent's resident set at the fork
           "python_driver_peak_rss_mb": round(H.hwm_kb(os.getpid()) / 1024, 1),
           "jvm_peak_rss_mb": round(H.hwm_kb(jvm_pid) / 1024, 1)}
    spark.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", default="10000")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--engines", default="spark,keyed,general")
    ap.add_argument("--child", nargs=3, metavar=("ENGINE", "LOG", "CKPT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(*args.child)), flush=True)
        return 0

    import harness as H

    engines = args.engines.split(",")
    runs = []
    work = Path(tempfile.mkdtemp(prefix="lowwater-sessions-"))
    try:
        for i, keys in enumerate(int(k) for k in args.keys.split(",")):
            log = work / f"log-{keys}"
            H.write_log(log, H.stream_for(PARTITIONS, keys, args.rows, SPAN_MS, BOUND_MS), args.batches, args.rows)
            cell: dict[str, Any] = {"keys": keys, "rows_per_batch": args.rows, "batches": args.batches,
                                    "load_average_1m": [round(os.getloadavg()[0], 2)]}
            for engine in (engines if i % 2 == 0 else engines[::-1]):
                cell[engine] = H.run_child(__file__, [engine, str(log), str(work / f"ck-{engine}-{keys}")],
                                           f"sessions {engine}: {keys} keys")
                cell["load_average_1m"].append(round(os.getloadavg()[0], 2))
            sp = cell.get("spark")
            for engine in engines:
                lw = cell[engine]
                if engine == "spark" or sp is None:
                    continue
                cell[f"ratio_time_{engine}"] = round(sp["median_batch_ms"] / lw["median_batch_ms"], 3)
                if lw.get("median_batch_cpu_ms") and sp.get("median_batch_cpu_ms"):
                    cell[f"ratio_cpu_{engine}"] = round(sp["median_batch_cpu_ms"] / lw["median_batch_cpu_ms"], 3)
            print(json.dumps({k: v for k, v in cell.items() if k.startswith(("keys", "ratio", "load"))} |
                             {f"{e}_python_rss_mb": cell[e]["python_driver_peak_rss_mb"] for e in engines} |
                             {f"{e}_median_batch_ms": cell[e]["median_batch_ms"] for e in engines}),
                  file=sys.stderr)
            runs.append(cell)
            shutil.rmtree(log, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc = {"benchmark": "sessions", "utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "config": {"partitions": PARTITIONS, "gap_ms": GAP_MS, "event_time_per_batch_ms": SPAN_MS,
                      "bound_ms": BOUND_MS, "master": "local[2]", "cpus": os.cpu_count()},
           "note": "ratio_time_<engine> = Spark median batch ms / that engine's (> 1: lowwater faster); "
                   "ratio_cpu_<engine> the same for CPU ms per batch",
           "runs": runs}
    out = HERE / "results" / f"sessions-{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    out.write_text(json.dumps(doc, indent=1))
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
