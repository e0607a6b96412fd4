"""Keys scaling: lowwater's native path against Spark's own windowed aggregation, driver memory included.

    .venv/bin/python benchmarks/scale.py [--keys 10000,100000,300000] [--rows 100000] [--batches 8]
                                         [--partitions 4] [--state-store hdfs|rocksdb] [--rounds 1]
                                         [--engines lowwater,spark[,executor]]

Per number of keys, one Parquet partitioned log (``--partitions``, default 4, every micro-batch 10 s
of event time, 2 s disorder, ``--rows`` rows per batch) is run by each engine in a fresh Python process
(``local[2]``, so the driver's memory is that run's alone; the order alternates;
``harness.run_child``):

* Spark: ``withWatermark("event_time", "2 seconds").groupBy(window(event_time, "1 minute"), key)
  .agg(sum(value))``, append mode, ``noop`` sink, HDFS-backed state store (Spark's default) or,
  with ``--state-store rocksdb``, RocksDB;
* lowwater: tumbling 1-minute windows, bounded out-of-orderness 2 s, sum, native path, results
  handed as a DataFrame to a ``noop`` write (:class:`harness.CountingSink`), which declines the
  batches with no results (``empty_batches = False``), as Spark's ``noop`` sink runs nothing
  for them (since session 19; before, every batch ran a ``noop`` write of an empty frame);
* with ``--engines ...,executor``, also lowwater with a Python timestamp assigner (the same field,
  read by a Python function): timestamps and watermarks on the executors (``path="executor"``),
  the windows native.

With ``--rounds N`` each engine runs N times per number of keys, the order alternating from
round to round: a cell's ratios are those of the engines' median runs (by median batch time; of
two runs, the faster), and each round's ratio is recorded beside them (``ratio_time_rounds``),
so that one run's noise on a shared 2-core machine does not decide a cell.

Reported per run: median batch time over the batches after the first, CPU time per batch (JVM +
Python driver, sampled from /proc), the driver's Python peak RSS (``VmHWM`` of the process that
runs the query; its ``ru_maxrss`` would include the parent's resident set at the fork) and the
JVM's peak RSS (``VmHWM``; in local mode the JVM is driver *and*
executor, so it holds Spark's state store too), and the 1-minute load average before and after.
Writes ``benchmarks/results/scale-<UTC timestamp>.json``. ``LOWWATER_BENCH_CONF`` (a JSON object
of Spark settings, e.g. ``'{"spark.sql.adaptive.enabled": "false"}'``) is applied to both
engines' sessions and recorded in the file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

WINDOW_MS = 60_000
SPAN_MS = 10_000
BOUND_MS = 2_000
PARTITIONS = 4



ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def child(engine: str, log: str, ckpt: str, partitions: str = "4", state_store: str = "hdfs") -> dict[str, Any]:
    """One engine's run on one log, in this (fresh) process."""
    import harness as H
    from cpu import CpuSampler

    from lowwater.spark.session import get_or_create_session

    conf = {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g"}
    if state_store == "rocksdb":  # Spark's own query only: lowwater keeps no state in Spark's state store
        conf["spark.sql.streaming.stateStore.providerClass"] = ROCKSDB
    conf.update(json.loads(os.environ.get("LOWWATER_BENCH_CONF", "{}")))
    spark = get_or_create_session(master="local[2]", app_name=f"scale-{engine}", conf=conf)
    n = int(partitions)
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    with CpuSampler.for_session(spark) as sampler:
        if engine == "spark":
            _, progress, wall = H.spark_native(spark, Path(log), Path(ckpt), n, H.bench_window_ms(WINDOW_MS),
                                               BOUND_MS)
            fired = None
        else:
            job, sinks, progress, wall = H.lowwater(spark, Path(log), Path(ckpt), n, H.bench_window_ms(WINDOW_MS),
                                                    BOUND_MS,
                                                    python_assigner=engine == "executor")
            if job.path != ("executor" if engine == "executor" else "native"):
                raise RuntimeError(f"the {engine} run took the {job.path} path")
            fired = sinks[0].rows
    times = H.progress_times(progress, sampler)
    out = {**H.summarize(times), "wall_s": round(wall, 1), "result_rows": fired,
           # VmHWM of this process: ru_maxrss would carry over the parent's resident set at the fork
           "python_driver_peak_rss_mb": round(H.hwm_kb(os.getpid()) / 1024, 1),
           "jvm_peak_rss_mb": round(H.hwm_kb(jvm_pid) / 1024, 1)}
    spark.stop()
    return out


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Of one engine's runs of a cell, the run whose median batch time is the median (the lower
    middle one of an even number)."""
    ordered = sorted(runs, key=lambda r: r["median_batch_ms"])
    return ordered[(len(ordered) - 1) // 2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", default="10000,100000,300000")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--partitions", type=int, default=PARTITIONS, help="source partitions (default 4)")
    ap.add_argument("--state-store", choices=("hdfs", "rocksdb"), default="hdfs",
                    help="Spark's state store provider for Spark's own query (default: HDFS-backed)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each engine per number of keys (default 1)")
    ap.add_argument("--engines", default="lowwater,spark",
                    help="comma-separated, of lowwater (native path), spark, executor (lowwater with a Python "
                         "timestamp assigner: watermarks on the executors); default lowwater,spark")
    ap.add_argument("--child", nargs=5, metavar=("ENGINE", "LOG", "CKPT", "PARTITIONS", "STORE"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(*args.child)), flush=True)
        return 0

    import harness as H

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(engines) - {"lowwater", "spark", "executor"}
    if unknown or not engines or len(set(engines)) != len(engines):
        ap.error(f"--engines: a list of distinct lowwater, spark, executor; got {args.engines!r}")
    runs = []
    work = Path(tempfile.mkdtemp(prefix="lowwater-scale-"))
    try:
        for i, keys in enumerate(int(k) for k in args.keys.split(",")):
            log = work / f"log-{keys}"
            stream = H.stream_for(args.partitions, keys, args.rows, SPAN_MS, BOUND_MS)
            H.write_log(log, stream, args.batches, args.rows)
            cell: dict[str, Any] = {"keys": keys, "rows_per_batch": args.rows, "batches": args.batches,
                                    "load_average_1m": [round(os.getloadavg()[0], 2)]}
            runs_of: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
            for r in range(args.rounds):
                for engine in (engines if (i + r) % 2 == 0 else engines[::-1]):
                    ckpt = work / f"ck-{engine}-{keys}-{r}"
                    argv = [engine, str(log), str(ckpt), str(args.partitions), args.state_store]
                    runs_of[engine].append(H.run_child(__file__, argv, f"scale {engine}: {keys} keys, round {r + 1}"))
                    cell["load_average_1m"].append(round(os.getloadavg()[0], 2))
                    shutil.rmtree(ckpt, ignore_errors=True)
            for engine, runs_ in runs_of.items():
                cell[engine] = median_run(runs_)
                if args.rounds > 1:
                    cell[f"{engine}_runs"] = runs_
            # Spark ÷ the native path (ratio_*), Spark ÷ the executor path (executor_ratio_*), the
            # native path ÷ the executor path (native_over_executor_*): > 1, the second is faster
            for prefix, num, den in (("ratio_", "spark", "lowwater"), ("executor_ratio_", "spark", "executor"),
                                     ("native_over_executor_", "lowwater", "executor")):
                if num not in cell or den not in cell:
                    continue
                x, y = cell[num], cell[den]
                cell[prefix + "time"] = round(x["median_batch_ms"] / y["median_batch_ms"], 3)
                if x.get("median_batch_cpu_ms") and y.get("median_batch_cpu_ms"):
                    cell[prefix + "cpu"] = round(x["median_batch_cpu_ms"] / y["median_batch_cpu_ms"], 3)
                if args.rounds > 1:
                    cell[prefix + "time_rounds"] = [round(u["median_batch_ms"] / v["median_batch_ms"], 3)
                                                    for u, v in zip(runs_of[num], runs_of[den], strict=True)]
            print(json.dumps({k: v for k, v in cell.items() if k in ("keys", "load_average_1m")
                              or k.endswith(("_time", "_cpu"))} |
                             {f"{e}_python_rss_mb": cell[e]["python_driver_peak_rss_mb"] for e in engines}),
                  file=sys.stderr)
            runs.append(cell)
            shutil.rmtree(log, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc = {"benchmark": "scale", "utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "config": {"partitions": args.partitions, "rounds": args.rounds, "engines": engines,
                      "spark_state_store": args.state_store,
                      "window_ms": H.bench_window_ms(WINDOW_MS),
                      "event_time_per_batch_ms": SPAN_MS,
                      "bound_ms": BOUND_MS, "master": "local[2]", "cpus": os.cpu_count(),
                      "spark_conf": json.loads(os.environ.get("LOWWATER_BENCH_CONF", "{}")),
                      "source": H.bench_source()},
           "note": "ratio_time = Spark median batch ms / lowwater median batch ms (> 1: lowwater faster); "
                   "executor_ratio_time = Spark's / the executor path's; native_over_executor_time = the native "
                   "path's / the executor path's; "
                   "ratio_cpu the same for CPU ms per batch; with rounds > 1, of each engine's median run "
                   "(ratio_time_rounds: each round's)",
           "runs": runs}
    out = HERE / "results" / f"scale-{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    out.write_text(json.dumps(doc, indent=1))
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
