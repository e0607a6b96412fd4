"""lowwater's native Spark path against Spark's own windowed aggregation, on the same data.

    .venv/bin/python benchmarks/run.py [--quick] [--skip grid,state,lagging,profile]

Prints one JSON document and writes it to ``benchmarks/results/<UTC timestamp>.json``.

1. ``grid``: keys x partitions x rows per micro-batch. Each cell writes a Parquet
   partitioned log with :class:`lowwater.io.SyntheticStream` (every batch covers 10 s of event
   time, 2 s of disorder), then runs, in alternating order, on ``local[2]``:

   * Spark: ``withWatermark("event_time", "2 seconds").groupBy(window(event_time, "10 seconds"),
     key).agg(sum(value))``, append mode, ``noop`` sink;
   * lowwater: the same windows on the native path (bounded out-of-orderness 2 s per
     partition, tumbling 10 s, sum), ``SparkRuntime(trigger="available_now", end_of_input=False)``,
     a sink that drops the rows.

   Both read the log through ``PartitionedLogSource.spark_stream`` with ``maxFilesPerTrigger`` =
   partitions, so micro-batch ``i`` is batch ``i`` of every partition for both. Steady state: the
   first micro-batch (planning, JIT, empty state) is left out; rows/s is rows per batch over the
   median batch time (Spark's ``triggerExecution``). CPU time (driver, JVM and Python workers) per batch is reported
   too, as the machine may be shared with other work.
2. ``state``: lowwater's state bytes under the checkpoint and open windows over 50 batches.
3. ``lagging``: one partition lagging more than two micro-batches of event time; on-time rows
   lost by Spark's watermark and by lowwater against a ground truth computed from the generated
   data, and lowwater's results against the reference runtime's.
4. ``profile``: where lowwater's time goes in a 1M-row micro-batch (``profile_native.py``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import harness as H  # noqa: E402
from cpu import CpuSampler  # noqa: E402

WINDOW_MS = 10_000
SPAN_MS = 10_000  # event time covered by one micro-batch
BOUND_MS = 2_000  # out-of-orderness bound (lowwater) = watermark delay (Spark) = disorder of the data

FULL_GRID = {"keys": [1_000, 100_000], "partitions": [4, 64], "rows": [100_000, 1_000_000]}
QUICK_GRID = {"keys": [1_000], "partitions": [4], "rows": [20_000]}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def machine(spark: Any) -> dict[str, Any]:
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    import pandas
    import pyarrow
    import pyspark

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=HERE).stdout.strip()
    except OSError:
        commit = ""
    conf = spark.sparkContext.getConf()
    return {
        "cpus": os.cpu_count(), "cpu_model": cpu_model, "memory_gib": mem_gib,
        "python": platform.python_version(), "pyspark": pyspark.__version__, "pandas": pandas.__version__,
        "pyarrow": pyarrow.__version__, "java": java[0] if java else "", "master": spark.sparkContext.master,
        "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        "driver_memory": conf.get("spark.driver.memory", "1g (default)"),
        "state_store": spark.conf.get("spark.sql.streaming.stateStore.providerClass"),
        "git_commit": commit, "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


# -- 1. the grid -----------------------------------------------------------------------------------
def run_cell(spark: Any, keys: int, partitions: int, rows: int, batches: int, workdir: Path,
             lowwater_first: bool) -> dict[str, Any]:
    cell = workdir / f"cell-{keys}-{partitions}-{rows}"
    stream = H.stream_for(partitions, keys, rows, SPAN_MS, BOUND_MS)
    t = time.monotonic()
    n = H.write_log(cell / "log", stream, batches, rows)
    write_s = time.monotonic() - t
    out: dict[str, Any] = {"keys": keys, "partitions": partitions, "rows_per_batch": rows, "batches": batches,
                           "rows_total": n, "write_log_s": round(write_s, 1)}
    load = [os.getloadavg()[0]]
    order = ["lowwater", "spark"] if lowwater_first else ["spark", "lowwater"]
    for engine in order:
        log(f"  {engine}: {keys} keys, {partitions} partitions, {rows} rows x {batches} batches")
        with CpuSampler.for_session(spark) as sampler:
            if engine == "spark":
                _, progress, wall = H.spark_native(spark, cell / "log", cell / "ck-spark", partitions,
                                                   WINDOW_MS, BOUND_MS)
                extra: dict[str, Any] = {}
            else:
                job, sinks, progress, wall = H.lowwater(spark, cell / "log", cell / "ck-lowwater", partitions,
                                                        WINDOW_MS, BOUND_MS)
                last = job.batches()[-1]["metrics"]
                extra = {"windows_fired_rows": sinks[0].rows, "open_windows_at_end": last["open_windows"],
                         "state_bytes_at_end": last["state_bytes"]}
        times = H.progress_times(progress, sampler)
        if len(times) != batches:
            raise RuntimeError(f"{engine}: expected {batches} micro-batches with data, got {len(times)}: "
                               "each micro-batch must be one batch of every partition")
        out[engine] = {**H.summarize(times), "wall_s": round(wall, 1), **extra}
        load.append(os.getloadavg()[0])
    lw, sp = out["lowwater"], out["spark"]
    out["ratio"] = round(lw["rows_per_s"] / sp["rows_per_s"], 3)
    if lw.get("rows_per_cpu_s") and sp.get("rows_per_cpu_s"):
        out["ratio_cpu"] = round(lw["rows_per_cpu_s"] / sp["rows_per_cpu_s"], 3)
    out["load_average_1m"] = [round(x, 2) for x in load]
    shutil.rmtree(cell, ignore_errors=True)
    return out


def run_grid(spark: Any, grid: dict[str, list[int]], workdir: Path, quick: bool) -> list[dict[str, Any]]:
    cells = []
    i = 0
    for rows in grid["rows"]:
        for partitions in grid["partitions"]:
            for keys in grid["keys"]:
                if quick:
                    batches = 4
                else:
                    batches = 9 if rows >= 1_000_000 else 16
                cells.append(run_cell(spark, keys, partitions, rows, batches, workdir, lowwater_first=i % 2 == 1))
                c = cells[-1]
                log(f"  -> spark {c['spark']['rows_per_s']} rows/s, lowwater {c['lowwater']['rows_per_s']} rows/s, "
                    f"ratio {c['ratio']} (cpu {c.get('ratio_cpu')})")
                i += 1
    return cells


# -- 2. state size -------------------------------------------------------------------------------------
def run_state(spark: Any, workdir: Path, batches: int, keys: int, partitions: int, rows: int) -> dict[str, Any]:
    d = workdir / "state"
    stream = H.stream_for(partitions, keys, rows, SPAN_MS, BOUND_MS)
    H.write_log(d / "log", stream, batches, rows)
    job, _, _progress, _ = H.lowwater(spark, d / "log", d / "ck", partitions, WINDOW_MS, BOUND_MS)
    recs = job.batches()
    series = [{"batch_id": r["batch_id"], "state_bytes": r["metrics"]["state_bytes"],
               "open_window_starts": r["metrics"].get("open_window_starts"),
               "duration_ms": r["metrics"]["duration_ms"]}
              for r in recs]
    state_dir = Path(job.store.state)
    states = sorted(state_dir.glob("*.json"), key=lambda p: int(p.stem))

    def pick(i: int) -> dict[str, Any]:
        return series[i]

    out = {
        "config": {"keys": keys, "partitions": partitions, "rows_per_batch": rows, "batches": batches,
                   "window_ms": WINDOW_MS, "event_time_per_batch_ms": SPAN_MS,
                   "snapshot_every": 20, "keep_snapshots": 2},
        "first": pick(0), "middle": pick(len(series) // 2), "last": pick(-1),
        "max_state_bytes": max(s["state_bytes"] for s in series),
        "max_open_window_starts": max(s["open_window_starts"] or 0 for s in series),
        "latest_control_state_json_bytes": states[-1].stat().st_size if states else None,
        "series": series,
    }
    shutil.rmtree(d, ignore_errors=True)
    return out


# -- 3. a lagging partition ------------------------------------------------------------------------------
def truth_model(stream: Any, batches: int, rows: int, window_ms: int, bound_ms: int) -> dict[str, Any]:
    """Flink's rules applied to the generated data directly (NumPy, no lowwater code): per
    partition ``W_p = max ts so far - bound - 1``, combined = min over partitions (never
    regressing), an element of batch ``k`` is late iff its window's ``end - 1 <= W`` after batch
    ``k - 1`` (no allowed lateness). Returns per-window on-time counts and the late rows."""
    import numpy as np

    MIN = -(2**63)
    maxes: dict[int, int] = {}
    combined = MIN
    counts: dict[tuple[str, int], int] = {}
    late = 0
    on_time = 0
    for i in range(batches):
        c = stream.batch_columns(i, rows)
        ws = c["ts"] - np.mod(c["ts"], window_ms)
        is_late = (ws + window_ms - 1) <= combined if combined != MIN else np.zeros(len(ws), dtype=bool)
        late += int(is_late.sum())
        keep = ~is_late
        on_time += int(keep.sum())
        keys, starts = c["key"][keep], ws[keep]
        pairs, n = np.unique(np.stack([np.char.add(keys.astype(str), ""), starts.astype(str)], axis=1), axis=0,
                             return_counts=True)
        for (k, s), cnt in zip(pairs.tolist(), n.tolist(), strict=True):
            counts[(k, int(s))] = counts.get((k, int(s)), 0) + cnt
        for p in range(stream.partitions):
            sel = c["partition"] == p
            if sel.any():
                maxes[p] = max(maxes.get(p, MIN), int(c["ts"][sel].max()))
        if len(maxes) == stream.partitions:
            combined = max(combined, min(m - bound_ms - 1 for m in maxes.values()))
    return {"counts": counts, "late": late, "on_time": on_time}


def run_lagging(spark: Any, workdir: Path, quick: bool) -> dict[str, Any]:
    from lowwater.api import OutputTag
    from lowwater.io import PartitionedLogWriter, SyntheticStream
    from lowwater.runtime import ReferenceRuntime

    partitions, keys, rows = 4, 50, 4_000
    batches = 10 if quick else 16
    span_ms, window_ms, bound_ms = 5_000, 5_000, 1_000
    lag_ms = 30_000  # six micro-batches of event time: more than Spark's two-batch grace
    d = workdir / "lagging"
    stream = SyntheticStream(partitions=partitions, keys=keys, events_per_second=rows * 1000 // span_ms,
                             disorder_ms=bound_ms, lagging_partition=1, lag_ms=lag_ms, late_fraction=0.002,
                             late_by_ms=60_000, seed=11, start_ms=H.START_MS)
    total = stream.write_to(PartitionedLogWriter(d / "log", "parquet", fsync=False), batches, rows)
    H.stamp_in_write_order(d / "log", partitions)
    truth = truth_model(stream, batches, rows, window_ms, bound_ms)

    # Spark's own watermark
    (q, table), progress, _ = H.spark_native(spark, d / "log", d / "ck-spark", partitions, window_ms, bound_ms,
                                             aggregate="count", sink="memory")
    spark_rows = spark.sql(f"SELECT key, unix_millis(window.start) AS ws, value FROM {table}").collect()
    spark_counts = {(r["key"], int(r["ws"])): int(r["value"]) for r in spark_rows}
    wm_iso = (q.lastProgress or {}).get("eventTime", {}).get("watermark")
    spark_wm = int(dt.datetime.strptime(wm_iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=dt.timezone.utc).timestamp() * 1000) if wm_iso else None
    dropped_metric = sum(int(op.get("numRowsDroppedByWatermark", 0))
                         for p in progress for op in p.get("stateOperators", []))
    closed = {w for w in truth["counts"] if spark_wm is not None and w[1] + window_ms <= spark_wm}
    spark_lost = sum(truth["counts"][w] - spark_counts.get(w, 0) for w in closed)
    spark_wrong = sum(1 for w in closed if truth["counts"][w] != spark_counts.get(w, 0))

    # lowwater, end of input fires every window
    late_tag = OutputTag("late")
    _job, (results, late), _, _ = H.lowwater(spark, d / "log", d / "ck-lowwater", partitions, window_ms, bound_ms,
                                            aggregate="count", end_of_input=True, late_tag=late_tag)
    lw_counts = {(r.key, r.window_start): int(r.value) for r in results.results}
    lw_lost = sum(c - lw_counts.get(w, 0) for w, c in truth["counts"].items())
    lw_wrong = sum(1 for w, c in truth["counts"].items() if lw_counts.get(w) != c)
    extra_windows = sorted(set(lw_counts) - set(truth["counts"]))

    # the reference runtime over the same log, micro-batch for micro-batch
    env, (ref_results, ref_late) = H.lowwater_env(d / "log", partitions, window_ms, bound_ms, aggregate="count",
                                                  late_tag=late_tag)
    src = next(t for t in _sources(env))
    src.records_per_batch = rows // partitions
    ReferenceRuntime(clock=None).execute(env, "reference")

    def canon(rs: list[Any]) -> list[tuple[Any, ...]]:
        return sorted((r.key, r.window_start, r.window_end, r.value, r.fire_index) for r in rs)

    def canon_late(rs: list[Any]) -> list[tuple[Any, ...]]:
        return sorted((r["key"], r["ts"], r["value"]) for r in rs)

    same_results = canon(results.results) == canon(ref_results.results)
    same_late = canon_late(late.results) == canon_late(ref_late.results)
    out = {
        "config": {"partitions": partitions, "keys": keys, "rows_per_batch": rows, "batches": batches,
                   "event_time_per_batch_ms": span_ms, "window_ms": window_ms, "bound_ms": bound_ms,
                   "lagging_partition": 1, "lag_ms": lag_ms, "late_fraction": 0.002, "late_by_ms": 60_000,
                   "micro_batches_of_lag": lag_ms / span_ms},
        "rows": total,
        "truth": {"on_time_rows": truth["on_time"], "late_rows": truth["late"], "windows": len(truth["counts"])},
        "spark": {"windows_emitted": len(spark_counts), "final_watermark_ms": spark_wm,
                  "windows_closed": len(closed), "on_time_rows_in_closed_windows": sum(
                      truth["counts"][w] for w in closed),
                  "on_time_rows_lost": spark_lost, "windows_with_wrong_count": spark_wrong,
                  "numRowsDroppedByWatermark_metric": dropped_metric},
        "lowwater": {"windows_emitted": len(lw_counts), "on_time_rows_lost": lw_lost,
                     "windows_with_wrong_count": lw_wrong, "windows_not_in_truth": len(extra_windows),
                     "late_output_rows": len(late.results),
                     "late_output_equals_truth": len(late.results) == truth["late"],
                     "equals_reference_runtime": same_results and same_late,
                     "results_equal_reference": same_results, "late_equal_reference": same_late},
    }
    shutil.rmtree(d, ignore_errors=True)
    return out


def _sources(env: Any) -> list[Any]:
    from lowwater.spark.plan import find_source

    return [find_source(env)]


# -- main ------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="lowwater vs Spark's windowed aggregation on the same data")
    ap.add_argument("--quick", action="store_true", help="a tiny grid, for a smoke test (< 2 min)")
    ap.add_argument("--skip", default="", help="comma-separated sections to skip: grid,state,lagging,profile")
    ap.add_argument("--out", default=str(HERE / "results"), help="directory for the JSON result")
    ap.add_argument("--keys", help="override the grid's keys, e.g. 1000,100000")
    ap.add_argument("--partitions", help="override the grid's partitions, e.g. 4,64")
    ap.add_argument("--rows", help="override the grid's rows per micro-batch, e.g. 100000,1000000")
    args = ap.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    from lowwater.spark.session import get_or_create_session

    started = time.monotonic()
    spark = get_or_create_session(master="local[2]", app_name="lowwater-bench",
                                  conf={"spark.ui.showConsoleProgress": "false"})
    workdir = Path(tempfile.mkdtemp(prefix="lowwater-bench-"))
    result: dict[str, Any] = {
        "command": " ".join(["benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])]),
        "started_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(spark),
        "workload": {"window": f"tumbling {WINDOW_MS} ms", "aggregate": "sum(value) per key",
                     "event_time_per_micro_batch_ms": SPAN_MS, "disorder_ms": BOUND_MS,
                     "watermark": f"lowwater: per-partition bounded out-of-orderness {BOUND_MS} ms, min over "
                                  f"partitions; Spark: withWatermark {BOUND_MS} ms",
                     "log": "Parquet segments (value as JSON text), one per partition per micro-batch",
                     "steady_state": "first micro-batch left out; rows/s = rows per batch / median batch time"},
    }
    try:
        H.check_same_as_writer(workdir / "check", H.stream_for(3, 10, 3000, SPAN_MS, BOUND_MS), 3, 3000)
        log("warm-up (JVM, both engines)")
        run_cell(spark, 1_000, 4, 100_000, 3 if args.quick else 8, workdir, lowwater_first=False)
        if "grid" not in skip:
            grid = dict(QUICK_GRID if args.quick else FULL_GRID)
            for name in ("keys", "partitions", "rows"):
                if getattr(args, name):
                    grid[name] = [int(x) for x in getattr(args, name).split(",")]
            result["grid"] = run_grid(spark, grid, workdir, args.quick)
        if "state" not in skip:
            log("state size")
            result["state_size"] = (run_state(spark, workdir, 12, 1_000, 4, 20_000) if args.quick
                                    else run_state(spark, workdir, 50, 100_000, 4, 100_000))
        if "lagging" not in skip:
            log("lagging partition")
            result["lagging_partition"] = run_lagging(spark, workdir, args.quick)
        if "profile" not in skip:
            import profile_native

            log("profile")
            prof = (profile_native.profile(spark, 1_000, 4, 20_000, 4, workdir / "profile") if args.quick
                    else profile_native.profile(spark, 100_000, 4, 1_000_000, 6, workdir / "profile"))
            prof.pop("per_batch_ms", None)
            result["profile"] = prof
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result["elapsed_s"] = round(time.monotonic() - started, 1)
    result["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(result, indent=1, default=str)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + ("-quick" if args.quick else "") + ".json"
    (out / name).write_text(text + "\n")
    log(f"wrote {out / name} in {result['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
