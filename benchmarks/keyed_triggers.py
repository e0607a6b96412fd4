"""Per-key Python: a count trigger and a process window function (keyed path) against the native tumbling sum.

    .venv/bin/python benchmarks/keyed_triggers.py [--keys 10000] [--rows 100000] [--batches 4]
                                                  [--engines native,spark,count,process] [--count 100]

One Parquet partitioned log (4 partitions, every micro-batch 10 s of event time, 2 s disorder,
``--rows`` rows per batch) per number of keys, run by each engine in a fresh Python process
(``local[2]``; the order alternates between cells). Every engine computes per key over
tumbling 1-minute event-time windows, bounded out-of-orderness 2 s:

* ``native``: lowwater, ``sum("value")`` on the native path (Spark SQL, no per-key Python): the
  baseline;
* ``spark``: Spark's own ``withWatermark("event_time", "2 seconds").groupBy(window(event_time,
  "1 minute"), key).agg(sum(value))``, append mode, ``noop`` sink (``harness.spark_native``);
* ``count``: lowwater, the same windows with ``.trigger(CountTrigger.of(--count))`` and
  ``sum("value")``, on the keyed path (the window operator per key in the executors' Python);
* ``process``: lowwater, the same windows with a :class:`ProcessWindowFunction` that emits
  ``(key, window start, window end, count, sum)`` per firing, on the keyed path;
* ``count_window`` and ``count_window_general``: lowwater, ``count_window(--count).sum("value")``
  per key (a global window, no time), on the keyed path and on the general path (the driver
  steps every element: where count windows ran until session 53).

Reported as in ``sessions.py``: median batch time and CPU time per batch after the first (the
driver, the JVM and the executors' Python workers, :class:`cpu.CpuSampler`, also per part), the
driver's Python peak RSS and the JVM's, the load average; ratios computed within this run. The
driver's RSS is given twice: ``ru_maxrss`` (it carries over the parent's resident set at the
fork) and ``VmHWM`` (reset by exec: this process's own peak); and the largest peak RSS of a
Python worker. (Until session 7 the CPU ratios were given twice, JVM + driver and "all"; the
sampler now counts all.)
lowwater's results go to :class:`harness.CountingSink`. Writes
``benchmarks/results/keyed-triggers-<UTC timestamp>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

WINDOW_MS = 60_000
SPAN_MS = 10_000
BOUND_MS = 2_000
PARTITIONS = 4
COUNT = 100
PATHS = {"native": "native", "count": "keyed", "process": "keyed", "count_window": "keyed",
         "count_window_general": "general"}


def _count_and_sum(key: Any, context: Any, elements: Iterable[Any]) -> Iterable[tuple[Any, ...]]:
    """The process window function's body: one row per firing with the window's count and sum."""
    n = total = 0
    for r in elements:
        n += 1
        total += int(r["value"])
    yield (key, context.window.start, context.window.end, n, total)


def _process_function() -> Any:
    from lowwater.core.windows import ProcessWindowFunction

    class CountAndSum(ProcessWindowFunction):
        def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Iterable[tuple[Any, ...]]:
            return _count_and_sum(key, context, elements)

    return CountAndSum()


def _lowwater(spark: Any, log: Path, ckpt: Path, engine: str, count: int) -> tuple[list[Any], float, dict[str, Any]]:
    import harness as H

    from lowwater.api import StreamExecutionEnvironment
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import CountTrigger, TumblingEventTimeWindows
    from lowwater.spark.engine import SparkRuntime
    from lowwater.spark.sources import PartitionedLogSource

    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(BOUND_MS).with_timestamp_assigner("ts")
    src = PartitionedLogSource(log, H.FIELDS, max_files_per_trigger=PARTITIONS)
    keyed = env.from_source(src, strategy).key_by("key")
    windowed = keyed.window(TumblingEventTimeWindows.of(WINDOW_MS))
    if engine in ("count_window", "count_window_general"):
        result = keyed.count_window(count).sum("value")
    elif engine == "native":
        result = windowed.sum("value")
    elif engine == "count":
        result = windowed.trigger(CountTrigger.of(count)).sum("value")
    elif engine == "process":
        result = windowed.process(_process_function())
    else:
        raise ValueError(engine)
    sink = H.CountingSink()
    result.add_sink(sink)
    want = PATHS[engine]
    started = time.monotonic()
    job = SparkRuntime(str(ckpt), spark=spark, path=want).execute(env, f"keyed-triggers-{engine}")  # type: ignore[arg-type]
    wall = time.monotonic() - started
    assert job.path == want, (engine, job.path, job.reason)
    from lowwater.metrics.line import running_totals

    batches = job.batches()
    raw = [int(b["metrics"].get("windows_fired") or 0) for b in batches]
    if "windows_fired" in running_totals(job.path):  # the general path's raw counter is a running total
        raw = [now - before for before, now in zip([0, *raw], raw, strict=False)]
    return list(job.query.recentProgress), wall, {
        "path": job.path, "sink_rows": sink.rows, "windows_fired": sum(raw),
        "windows_fired_per_batch": raw,
        "watermark_per_batch": [b["metrics"].get("combined_watermark") for b in batches],
        "phases_per_batch": [b["metrics"].get("phases") for b in batches]}


def _python_workers(jvm_pid: int) -> dict[str, Any]:
    """The executors' Python processes under the JVM now (before the session stops): count, largest peak RSS."""
    import harness as H
    from cpu import _proc_tree, descendants

    pids = [p for p in descendants(_proc_tree(), jvm_pid) if p != jvm_pid]
    hwm = []
    for p in pids:
        try:
            hwm.append(H.hwm_kb(p))
        except OSError:
            continue
    return {"python_workers_alive": len(hwm), "python_worker_max_peak_rss_mb": round(max(hwm, default=0) / 1024, 1)}


def _worker_lowwater(spark: Any) -> str:
    """Where the executors' Python workers import lowwater from (the checkout under test?)."""

    def where(_: Any) -> Iterable[str]:
        import lowwater

        yield str(Path(lowwater.__file__).parent)

    return sorted(set(spark.sparkContext.parallelize([0, 1], 2).mapPartitions(where).collect()))[0]


def child(engine: str, log: str, ckpt: str, count: str) -> dict[str, Any]:
    import harness as H
    from cpu import CpuSampler

    import lowwater
    from lowwater.spark.session import get_or_create_session

    spark = get_or_create_session(master="local[2]", app_name=f"keyed-triggers-{engine}",
                                  conf={"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g"})
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    extra: dict[str, Any] = {"driver_lowwater": str(Path(lowwater.__file__).parent),
                             "worker_lowwater": _worker_lowwater(spark)}
    with CpuSampler.for_session(spark) as sampler:
        if engine == "spark":
            _, progress, wall = H.spark_native(spark, Path(log), Path(ckpt), PARTITIONS, WINDOW_MS, BOUND_MS)
        else:
            progress, wall, info = _lowwater(spark, Path(log), Path(ckpt), engine, int(count))
            extra.update(info)
    times = H.progress_times(progress, sampler)
    extra |= _python_workers(jvm_pid)
    out = {**H.summarize(times), "wall_s": round(wall, 1), **extra,
           "python_driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
           # ru_maxrss (as sessions.py and scale.py report it) carries over the parent's resident set at
           # fork: this child's figure is at least what the parent held when it started it. VmHWM is
           # reset by exec, so it is this process's own peak.
           "python_driver_vmhwm_mb": round(H.hwm_kb(os.getpid()) / 1024, 1),
           "jvm_peak_rss_mb": round(H.hwm_kb(jvm_pid) / 1024, 1)}
    spark.stop()
    return out


def _ratios(cell: dict[str, Any], base: str, engines: list[str]) -> None:
    """``ratio_{time,cpu}_<engine>_vs_<base>`` = base's median / the engine's (> 1: the engine is faster)."""
    b = cell.get(base)
    if b is None:
        return
    for engine in engines:
        if engine == base:
            continue
        e = cell[engine]
        cell[f"ratio_time_{engine}_vs_{base}"] = round(b["median_batch_ms"] / e["median_batch_ms"], 3)
        if e.get("median_batch_cpu_ms") and b.get("median_batch_cpu_ms"):
            cell[f"ratio_cpu_{engine}_vs_{base}"] = round(b["median_batch_cpu_ms"] / e["median_batch_cpu_ms"], 3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", default="10000")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--engines", default="native,spark,count,process")
    ap.add_argument("--count", type=int, default=COUNT, help="the count trigger's max_count")
    ap.add_argument("--child", nargs=4, metavar=("ENGINE", "LOG", "CKPT", "COUNT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(*args.child)), flush=True)
        return 0

    import harness as H

    engines = args.engines.split(",")
    runs = []
    work = Path(tempfile.mkdtemp(prefix="lowwater-keyed-triggers-"))
    try:
        for i, keys in enumerate(int(k) for k in args.keys.split(",")):
            log = work / f"log-{keys}"
            H.write_log(log, H.stream_for(PARTITIONS, keys, args.rows, SPAN_MS, BOUND_MS), args.batches, args.rows)
            cell: dict[str, Any] = {"keys": keys, "rows_per_batch": args.rows, "batches": args.batches,
                                    "order": engines if i % 2 == 0 else engines[::-1],
                                    "load_average_1m": [round(os.getloadavg()[0], 2)]}
            for engine in cell["order"]:
                cell[engine] = H.run_child(__file__, [engine, str(log), str(work / f"ck-{engine}-{keys}"),
                                                      str(args.count)], f"keyed-triggers {engine}: {keys} keys")
                cell["load_average_1m"].append(round(os.getloadavg()[0], 2))
            _ratios(cell, "native", engines)
            _ratios(cell, "spark", engines)
            print(json.dumps({k: v for k, v in cell.items() if k.startswith(("keys", "ratio", "load"))} |
                             {f"{e}_median_batch_ms": cell[e]["median_batch_ms"] for e in engines} |
                             {f"{e}_median_batch_cpu_ms": cell[e].get("median_batch_cpu_ms") for e in engines}),
                  file=sys.stderr)
            runs.append(cell)
            shutil.rmtree(log, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc = {"benchmark": "keyed-triggers", "utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "config": {"partitions": PARTITIONS, "window_ms": WINDOW_MS, "count_trigger": args.count,
                      "event_time_per_batch_ms": SPAN_MS, "bound_ms": BOUND_MS, "master": "local[2]",
                      "cpus": os.cpu_count()},
           "note": "ratio_time_<engine>_vs_<base> = base's median batch ms / that engine's (> 1: the engine is "
                   "faster than base); ratio_cpu_<engine>_vs_<base> the same for CPU ms per batch of the driver, the "
                   "JVM and the executors' Python workers (cpu.CpuSampler; median_batch_cpu_parts_ms per part)",
           "runs": runs}
    out = HERE / "results" / f"keyed-triggers-{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    out.write_text(json.dumps(doc, indent=1))
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
