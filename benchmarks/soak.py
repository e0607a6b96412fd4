"""Soak run: lowwater's native Spark path over many micro-batches, watching memory, state and time.

    .venv/bin/python benchmarks/soak.py                      # 20M events, 200 micro-batches (~5-15 min)
    .venv/bin/python benchmarks/soak.py --quick              # 1M events, 20 micro-batches (smoke test)
    .venv/bin/python benchmarks/soak.py --events 40000000 --batches 400

Not part of CI. It writes a Parquet partitioned log under ``--workdir`` (``/tmp`` by default,
with :func:`harness.write_log`, i.e. :class:`lowwater.io.SyntheticStream`: keys drawn
uniformly, disorder, a small fraction of really late rows, one lagging partition), then runs
``SparkRuntime(path="native", trigger="available_now", end_of_input=True)`` over all of it on
``local[2]``: tumbling windows with allowed lateness, ``count()``, the late side output, and
both written to disk by :class:`DirectorySink` (nothing accumulates in memory).

While the query runs, a thread samples every ``--interval`` seconds: the RSS of this Python
driver process, of the Spark driver JVM (found by its pid) and of any Python worker processes
under it (``/proc/<pid>/status`` VmRSS), the JVM's heap (used / committed, through py4j), the
checkpoint's state snapshots and the number of micro-batches done. Per micro-batch it takes
lowwater's metrics line (``<checkpoint>/lowwater/metrics.jsonl``: ``duration_ms``,
``state_bytes``, ``open_windows``, rows in / late, windows fired), Spark's own trigger time
(a query listener) and the CPU time (JVM + driver) from one batch's results to the next: on a
shared machine CPU time is far less noisy than wall time. At the end it checks the accounting
(every event is in a final window count or in the late output), then writes
``benchmarks/results/soak-<UTC timestamp>.json`` (raw series and summary) and a PNG beside it.

Summary: RSS at 10 %, 50 %, 90 % and 100 % of the micro-batches and its maximum; state bytes
and open windows, median of the first 20 batches after a 10-batch warm-up against the last 20
(and per 20-batch snapshot cycle, since ``state_bytes`` is a sawtooth: a snapshot every 20
batches, deltas in between, two snapshots kept); batch duration, median of batches 10-29
against the last 20, and the least-squares and Theil-Sen slopes in ms per 100 batches.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import harness as H  # noqa: E402

from lowwater.api.sinks import Sink  # noqa: E402

WINDOW_MS = 10_000
SPAN_MS = 10_000  # event time covered by one micro-batch
BOUND_MS = 2_000  # out-of-orderness bound = disorder of the data
LATENESS_MS = 10_000  # allowed lateness
LATE_FRACTION = 0.001
LATE_BY_MS = 20_000
LAGGING_PARTITION, LAG_MS = 1, 15_000
WARMUP = 10
EDGE = 20  # batches compared at each end
SNAPSHOT_EVERY = 20


def log(msg: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- processes ------------------------------------------------------------------------------------
def rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def cpu_s(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (from /proc's parent pids)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


# -- instruments ----------------------------------------------------------------------------------
class ProgressSink(Sink):
    """A :class:`DirectorySink` that also notes how many micro-batches (and rows) went through."""

    def __init__(self, path: Path, fmt: Any) -> None:
        from lowwater.spark.sinks.files import DirectorySink

        self.inner = DirectorySink(path, fmt)
        self.batches_done = 0
        self.last_batch_id = -1
        self.rows = 0
        self.pids: tuple[int, ...] = ()  # whose CPU time to note at every batch
        self.cpu_at: dict[int, float] = {}  # batch id -> CPU seconds of ``pids`` when its results were written

    def open(self) -> None:
        self.inner.open()

    def close(self) -> None:
        self.inner.close()

    def write_batch(self, batch_id: int, rows: Sequence[Any]) -> None:
        self.inner.write_batch(batch_id, rows)
        self.rows += len(rows)
        self.last_batch_id = batch_id
        self.batches_done += 1
        if self.pids:
            self.cpu_at[batch_id] = sum(cpu_s(p) or 0.0 for p in self.pids)


class Sampler:
    """Every ``interval_s``: RSS of the driver, the JVM and Python workers, JVM heap, snapshots, batches done."""

    def __init__(self, spark: Any, state_dir: Path, sink: ProgressSink, interval_s: float) -> None:
        self.me = os.getpid()
        self.runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()
        self.jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        self.state_dir = state_dir
        self.sink = sink
        self.interval_s = interval_s
        self.samples: list[dict[str, Any]] = []
        self.snapshots: dict[int, int] = {}  # version -> bytes of its .snap
        self.max_state_files = 0
        self.live_every = 0  # batches between live-heap histograms (0: none)
        self.next_live = 0
        self.live: list[dict[str, Any]] = []
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="soak-sampler")

    def start(self) -> None:
        self.t0 = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def sample(self) -> dict[str, Any]:
        workers = [p for p in descendants(self.jvm) if comm(p).startswith("python")]
        s: dict[str, Any] = {
            "t_s": round(time.monotonic() - self.t0, 2),
            "batches_done": self.sink.batches_done,
            "py_rss": rss_bytes(self.me),
            "jvm_rss": rss_bytes(self.jvm),
            "workers": len(workers),
            "workers_rss": sum(rss_bytes(p) or 0 for p in workers),
            "load1": round(os.getloadavg()[0], 2),
        }
        try:
            total, free = self.runtime.totalMemory(), self.runtime.freeMemory()
            s["heap_used"], s["heap_committed"] = int(total - free), int(total)
        except Exception:  # the gateway may be busy shutting down
            s["heap_used"] = s["heap_committed"] = None
        try:
            files = list(self.state_dir.iterdir())
            self.max_state_files = max(self.max_state_files, len(files))
            for f in files:
                if f.suffix == ".snap" and not f.name.startswith("."):
                    self.snapshots.setdefault(int(f.stem), f.stat().st_size)
        except (OSError, ValueError):
            pass
        return s

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self.sample())
            if self.live_every and self.sink.batches_done >= self.next_live:
                self.live.append(self.live_heap())
                self.next_live = self.sink.batches_done + self.live_every
            self._stop.wait(self.interval_s)

    def live_heap(self, top: int = 150) -> dict[str, Any]:
        """``jcmd <jvm> GC.class_histogram``: a full GC, then the live objects by class."""
        done, t = self.sink.batches_done, round(time.monotonic() - self.t0, 2)
        try:
            text = subprocess.run(["jcmd", str(self.jvm), "GC.class_histogram"], capture_output=True, text=True,
                                  timeout=120).stdout
        except (OSError, subprocess.SubprocessError) as e:
            return {"batches_done": done, "t_s": t, "error": str(e)}
        classes, total = [], None
        for line in text.splitlines():
            f = line.split()
            if len(f) >= 4 and f[0].endswith(":") and f[1].isdigit():
                classes.append([f[3], int(f[1]), int(f[2])])
            elif len(f) >= 3 and f[0] == "Total":
                total = {"instances": int(f[1]), "bytes": int(f[2])}
        return {"batches_done": done, "t_s": t, "live_bytes": total["bytes"] if total else None,
                "live_instances": total["instances"] if total else None, "top": classes[:top]}


def trigger_listener(spark: Any) -> Any:
    """Spark's own per-batch times (``durationMs``), for every batch (``recentProgress`` keeps 100)."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class _L(StreamingQueryListener):
        def __init__(self) -> None:
            self.rows: dict[int, dict[str, int]] = {}

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            p = event.progress
            d = dict(p.durationMs or {})
            self.rows[int(p.batchId)] = {"trigger_ms": int(d.get("triggerExecution", 0)),
                                         "add_batch_ms": int(d.get("addBatch", 0)),
                                         "get_batch_ms": int(d.get("getBatch", 0)),
                                         "latest_offset_ms": int(d.get("latestOffset", 0)),
                                         "spark_rows": int(p.numInputRows)}

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    listener = _L()
    spark.streams.addListener(listener)
    return listener


# -- statistics -----------------------------------------------------------------------------------
def median(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def slopes(xs: Sequence[float], ys: Sequence[float]) -> tuple[float | None, float | None]:
    """Least-squares and Theil-Sen (median of pairwise) slopes of ``ys`` over ``xs``."""
    n = len(xs)
    if n < 2:
        return None, None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    ls = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else None
    pairs = [(ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(n) for j in range(i + 1, n) if xs[j] != xs[i]]
    return ls, (statistics.median(pairs) if pairs else None)


def at_fraction(samples: list[dict[str, Any]], batches: int, frac: float) -> dict[str, Any] | None:
    """The first sample taken once ``frac`` of the micro-batches were done."""
    need = max(1, round(frac * batches))
    for s in samples:
        if s["batches_done"] >= need:
            return s
    return None


def mib(x: float | None) -> float | None:
    return None if x is None else round(x / 2**20, 1)


def growth(first: float | None, last: float | None) -> float | None:
    return None if not first or last is None else round(last / first - 1, 4)


def summarize(series: list[dict[str, Any]], samples: list[dict[str, Any]], snapshots: dict[int, int],
              events: int, wall_s: float) -> dict[str, Any]:
    n = len(series)
    first = series[WARMUP:WARMUP + EDGE]
    last = series[-EDGE:]
    out: dict[str, Any] = {"events": events, "micro_batches": n, "query_wall_s": round(wall_s, 1),
                           "events_per_s": round(events / wall_s) if wall_s else None,
                           "rows_in": sum(b["rows_in"] for b in series),
                           "rows_late": sum(b["rows_late"] for b in series),
                           "windows_fired": sum(b["windows_fired"] for b in series)}

    # memory
    mem: dict[str, Any] = {}
    marks = {f"{int(f * 100)}%": at_fraction(samples, n, f) for f in (0.1, 0.5, 0.9, 1.0)}
    for key in ("py_rss", "jvm_rss", "workers_rss", "heap_committed"):
        vals = [s[key] for s in samples if s.get(key) is not None]
        mem[key + "_mib"] = {**{k: mib(s.get(key)) if s else None for k, s in marks.items()},
                             "max": mib(max(vals)) if vals else None}
    # heap used is a GC sawtooth: compare its floor (min) and median per tenth of the run
    tenths = []
    for i in range(10):
        lo, hi = i * n / 10, (i + 1) * n / 10
        used = [s["heap_used"] for s in samples if s.get("heap_used") is not None and lo <= s["batches_done"] < hi]
        tenths.append({"batches": f"{int(lo)}-{int(hi) - 1}", "min_mib": mib(min(used)) if used else None,
                       "median_mib": mib(median(used)) if used else None})
    mem["heap_used_by_tenth"] = tenths
    py = [(s["batches_done"], s["py_rss"]) for s in samples if s["batches_done"] >= WARMUP and s.get("py_rss")]
    jv = [(s["batches_done"], s["jvm_rss"]) for s in samples if s["batches_done"] >= WARMUP and s.get("jvm_rss")]
    for name, pts in (("py_rss", py), ("jvm_rss", jv)):
        if len(pts) > 2:
            # subsample for Theil-Sen (pairs grow quadratically)
            step = max(1, len(pts) // 300)
            pts = pts[::step]
            ls, ts = slopes([p[0] for p in pts], [p[1] for p in pts])
            mem[name + "_slope_mib_per_100_batches"] = {"least_squares": mib(ls * 100) if ls is not None else None,
                                                        "theil_sen": mib(ts * 100) if ts is not None else None}
    out["memory"] = mem

    # state
    st: dict[str, Any] = {}
    for key in ("state_bytes", "open_windows"):
        a, b = median([x[key] for x in first]), median([x[key] for x in last])
        st[key] = {f"median_batches_{WARMUP}_{WARMUP + EDGE - 1}": a, f"median_last_{EDGE}": b, "growth": growth(a, b),
                   "max": max(x[key] for x in series)}
    cycles = []
    for c in range(0, n, SNAPSHOT_EVERY):
        seg = series[c:c + SNAPSHOT_EVERY]
        if len(seg) == SNAPSHOT_EVERY:
            cycles.append({"batches": f"{c}-{c + SNAPSHOT_EVERY - 1}",
                           "state_bytes_min": min(x["state_bytes"] for x in seg),
                           "state_bytes_max": max(x["state_bytes"] for x in seg),
                           "state_bytes_median": median([x["state_bytes"] for x in seg]),
                           "open_windows_median": median([x["open_windows"] for x in seg])})
    st["per_snapshot_cycle"] = cycles
    snaps = sorted((v, b) for v, b in snapshots.items() if v < n)  # not the end-of-input step's
    st["snapshot_bytes"] = {str(v): b for v, b in snaps}
    if len(snaps) >= 2:
        st["snapshot_bytes_first_vs_last"] = [snaps[0][1], snaps[-1][1], growth(snaps[0][1], snaps[-1][1])]
    out["state"] = st

    # time
    tm: dict[str, Any] = {}
    for key in ("duration_ms", "trigger_ms", "cpu_ms"):
        steady = [x for x in series[WARMUP:] if x.get(key) is not None]
        if len(steady) < 2:
            continue
        a = median([x[key] for x in series[10:30] if x.get(key) is not None])
        b = median([x[key] for x in last if x.get(key) is not None])
        ls, ts = slopes([float(x["batch_id"]) for x in steady], [float(x[key]) for x in steady])
        tm[key] = {"median_batches_10_29": a, f"median_last_{EDGE}": b, "growth": growth(a, b),
                   "slope_ms_per_100_batches": {"least_squares": round(ls * 100, 1) if ls is not None else None,
                                                "theil_sen": round(ts * 100, 1) if ts is not None else None},
                   "median_all_after_warmup": median([x[key] for x in steady]),
                   "max": max(x[key] for x in series if x.get(key) is not None)}
    out["batch_time"] = tm
    loads = [s["load1"] for s in samples]
    out["load_average_1m"] = {"min": min(loads), "median": median(loads), "max": max(loads)} if loads else None
    return out


def live_heap_summary(live: list[dict[str, Any]]) -> dict[str, Any]:
    """Live heap (after a full GC) over the run, and the classes whose live bytes grew most."""
    ok = [h for h in live if h.get("live_bytes")]
    out: dict[str, Any] = {"points": [[h["batches_done"], mib(h["live_bytes"])] for h in ok]}
    if len(ok) >= 3:
        a, b = ok[1], ok[-1]  # from the first histogram taken during the run (not before it) to the last
        ga, gb = {c[0]: c for c in a["top"]}, {c[0]: c for c in b["top"]}  # the largest classes only
        grew = sorted(((k, gb[k][2] - ga.get(k, [k, 0, 0])[2], ga.get(k, [k, 0, 0])[1], gb[k][1]) for k in gb),
                      key=lambda x: -x[1])
        out["grew_between_batches"] = [a["batches_done"], b["batches_done"]]
        out["top_growth"] = [{"class": k, "bytes": d, "instances": [ia, ib]} for k, d, ia, ib in grew[:10]]
        xs = [float(h["batches_done"]) for h in ok[1:]]
        ls, ts = slopes(xs, [float(h["live_bytes"]) for h in ok[1:]])
        out["slope_mib_per_100_batches"] = {"least_squares": mib(ls * 100) if ls is not None else None,
                                            "theil_sen": mib(ts * 100) if ts is not None else None}
    return out


# -- accounting -----------------------------------------------------------------------------------
def accounting(results_dir: Path, late_dir: Path, events: int) -> dict[str, Any]:
    """Every event is counted once: in its window's final count, or in the late output."""
    import pyarrow.dataset as ds

    table = ds.dataset(str(results_dir), format="parquet", partitioning="hive").to_table(
        columns=["key", "window_start", "value", "fire_index"])
    df = table.to_pandas()
    final = df.sort_values("fire_index").drop_duplicates(["key", "window_start"], keep="last")
    late = 0
    for f in late_dir.glob("batch=*/part.jsonl"):
        with open(f) as fh:
            late += sum(1 for _ in fh)
    counted = int(final["value"].sum())
    return {"result_rows": len(df), "windows": len(final), "refirings": int((df["fire_index"] > 0).sum()),
            "events_in_final_window_counts": counted, "late_output_rows": late,
            "events_accounted": counted + late, "events_written": events, "all_accounted": counted + late == events}


# -- plot -----------------------------------------------------------------------------------------
def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series, samples = result["batches"], result["samples"]
    fig, ax = plt.subplots(4, 1, figsize=(8, 9), sharex=True)
    b = [s["batches_done"] for s in samples]
    ax[0].plot(b, [(s["py_rss"] or 0) / 2**20 for s in samples], label="driver Python RSS")
    ax[0].plot(b, [(s["jvm_rss"] or 0) / 2**20 for s in samples], label="driver JVM RSS")
    ax[0].plot(b, [(s["heap_used"] or 0) / 2**20 for s in samples], label="JVM heap used", lw=0.6)
    live = result["summary"].get("live_heap", {}).get("points", [])
    if live:
        ax[0].plot([p[0] for p in live], [p[1] for p in live], "s-", ms=3, label="JVM live heap (after full GC)")
    ax[0].set_ylabel("MiB")
    ax[0].legend(fontsize=7, loc="upper left")
    ids = [x["batch_id"] for x in series]
    ax[1].plot(ids, [x["state_bytes"] / 2**20 for x in series], label="state_bytes (checkpoint state dir)")
    snaps = sorted((int(v), n) for v, n in result["summary"]["state"]["snapshot_bytes"].items())
    ax[1].plot([v for v, _ in snaps], [n / 2**20 for _, n in snaps], "o", ms=3, label="snapshot (live state)")
    ax[1].set_ylabel("MiB")
    ax[1].legend(fontsize=7, loc="upper left")
    ax[2].plot(ids, [x["open_windows"] for x in series])
    ax[2].set_ylabel("open windows")
    ax[3].plot(ids, [x["duration_ms"] for x in series], lw=0.7, label="lowwater duration_ms")
    if all(x.get("trigger_ms") is not None for x in series):
        ax[3].plot(ids, [x["trigger_ms"] for x in series], lw=0.7, label="Spark triggerExecution")
    if all(x.get("cpu_ms") is not None for x in series):
        ax[3].plot(ids, [x["cpu_ms"] for x in series], lw=0.7, label="CPU ms (JVM + driver)")
    ax[3].set_ylabel("ms per batch")
    ax[3].set_xlabel("micro-batch")
    ax[3].legend(fontsize=7, loc="upper left")
    c = result["config"]
    fig.suptitle(f"lowwater soak: {c['events']:,} events, {c['batches']} micro-batches, {c['keys']:,} keys, "
                 f"{c['partitions']} partitions", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=70)
    plt.close(fig)


# -- main -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="lowwater soak: memory, state and batch time over many micro-batches")
    ap.add_argument("--events", type=int, default=20_000_000)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--late-fraction", type=float, default=LATE_FRACTION, help="rows late by 22 s")
    ap.add_argument("--live-heap-every", type=int, default=0, metavar="N",
                    help="every N batches, a JVM class histogram (jcmd; forces a full GC): the live heap")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between memory samples")
    ap.add_argument("--quick", action="store_true", help="1M events in 20 micro-batches")
    ap.add_argument("--workdir", default="/tmp/lowwater-soak", help="log, checkpoint and sink output (deleted)")
    ap.add_argument("--keep", action="store_true", help="keep the workdir")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    if args.quick:
        args.events, args.batches = 1_000_000, 20
    rows = args.events // args.batches
    if rows * args.batches != args.events:
        ap.error("--events must be a multiple of --batches")

    from lowwater.api import OutputTag, StreamExecutionEnvironment
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.io import SyntheticStream
    from lowwater.spark.engine import SparkRuntime
    from lowwater.spark.session import get_or_create_session
    from lowwater.spark.sources import PartitionedLogSource

    started_utc = dt.datetime.now(dt.timezone.utc)
    try:  # what was measured: the commit, and any uncommitted change to the library
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], capture_output=True, text=True,
                               cwd=HERE.parent).stdout.splitlines()
    except OSError:
        dirty = []
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    config = {"events": args.events, "batches": args.batches, "rows_per_batch": rows, "partitions": args.partitions,
              "keys": args.keys, "event_time_per_batch_ms": SPAN_MS, "disorder_ms": BOUND_MS,
              "window": f"tumbling {WINDOW_MS} ms", "aggregate": "count()", "allowed_lateness_ms": LATENESS_MS,
              "watermark": f"bounded out-of-orderness {BOUND_MS} ms per partition, min over partitions",
              "late_fraction": args.late_fraction, "late_by_ms": LATE_BY_MS, "lagging_partition": LAGGING_PARTITION,
              "lag_ms": LAG_MS, "sinks": "DirectorySink: results Parquet, late output JSON lines",
              "runtime": "SparkRuntime(path='native', trigger='available_now', end_of_input=True), local[2]",
              "snapshot_every": SNAPSHOT_EVERY, "warmup_batches": WARMUP, "sample_interval_s": args.interval}
    eps = max(1, rows * 1000 // SPAN_MS)
    stream = SyntheticStream(partitions=args.partitions, keys=args.keys, events_per_second=eps, disorder_ms=BOUND_MS,
                             lagging_partition=LAGGING_PARTITION if args.partitions > 1 else None, lag_ms=LAG_MS,
                             late_fraction=args.late_fraction, late_by_ms=LATE_BY_MS, seed=7, start_ms=H.START_MS)
    t = time.monotonic()
    log(f"writing {args.events:,} events in {args.batches} batches to {work / 'log'}")
    events = H.write_log(work / "log", stream, args.batches, rows)
    write_s = time.monotonic() - t
    log_bytes = sum(f.stat().st_size for f in (work / "log").rglob("*") if f.is_file())
    log(f"log written in {write_s:.0f} s ({log_bytes / 2**20:.0f} MiB)")

    spark = get_or_create_session(master="local[2]", app_name="lowwater-soak",
                                  conf={"spark.ui.showConsoleProgress": "false"})
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(BOUND_MS).with_timestamp_assigner("ts")
    src = PartitionedLogSource(work / "log", H.FIELDS, max_files_per_trigger=args.partitions)
    late_tag = OutputTag("late")
    windowed = (env.from_source(src, strategy).key_by("key").window(TumblingEventTimeWindows.of(WINDOW_MS))
                .allowed_lateness(LATENESS_MS).side_output_late_data(late_tag))
    result_stream = windowed.count()
    results_sink = ProgressSink(work / "results", "parquet")
    late_sink = ProgressSink(work / "late", "jsonl")
    result_stream.add_sink(results_sink)
    result_stream.get_side_output(late_tag).add_sink(late_sink)

    ckpt = work / "ckpt"
    listener = trigger_listener(spark)
    sampler = Sampler(spark, ckpt / "lowwater" / "state", results_sink, args.interval)
    before = sampler.sample()
    cpu0 = {"py": cpu_s(sampler.me), "jvm": cpu_s(sampler.jvm)}
    results_sink.pids = (sampler.me, sampler.jvm)
    if args.live_heap_every:
        sampler.live_every = args.live_heap_every
        sampler.live.append(sampler.live_heap())
        sampler.next_live = args.live_heap_every
    log(f"running: python pid {sampler.me}, JVM pid {sampler.jvm}")
    sampler.start()
    t = time.monotonic()
    job = SparkRuntime(str(ckpt), spark=spark, path="native", trigger="available_now", end_of_input=True,
                       snapshot_every=SNAPSHOT_EVERY, clock=lambda b: H.START_MS + 1000 * b).execute(env, "soak")
    wall = time.monotonic() - t
    sampler.stop()
    after = sampler.sample()
    sampler.samples.append(after)
    time.sleep(2)  # the listener's last progress events arrive asynchronously
    cpu = {"py_cpu_s": round((cpu_s(sampler.me) or 0) - (cpu0["py"] or 0), 1),
           "jvm_cpu_s": round((cpu_s(sampler.jvm) or 0) - (cpu0["jvm"] or 0), 1)}
    spark.streams.removeListener(listener)
    log(f"query done in {wall:.0f} s; {results_sink.batches_done} batches through the sink")

    lines = job.metrics()
    series = []
    end_step = None
    for m in lines:
        row = {"batch_id": m["batch_id"], "duration_ms": m["duration_ms"], "state_bytes": m["state_bytes"],
               "open_windows": m["open_windows"], "rows_in": m["rows_in"], "rows_late": m["rows_late"],
               "rows_dead_lettered": m.get("rows_dead_lettered", 0), "windows_fired": m["windows_fired"],
               "combined_watermark": m.get("combined_watermark")}
        if m.get("end_of_input"):
            end_step = row
            continue
        b = m["batch_id"]
        if b in results_sink.cpu_at:  # CPU (JVM + driver) from the previous batch's results to this one's
            prev = results_sink.cpu_at.get(b - 1, (cpu0["py"] or 0) + (cpu0["jvm"] or 0) if b == 0 else None)
            row["cpu_ms"] = round((results_sink.cpu_at[b] - prev) * 1000) if prev is not None else None
        spark_row = listener.rows.get(m["batch_id"], {})
        row.update({k: spark_row.get(k) for k in ("trigger_ms", "add_batch_ms", "get_batch_ms", "latest_offset_ms")})
        series.append(row)
    if len(series) != args.batches:
        raise RuntimeError(f"expected {args.batches} micro-batches with data, got {len(series)}")

    summary = summarize(series, sampler.samples, sampler.snapshots, events, wall)
    summary["end_of_input_step"] = end_step
    summary["cpu"] = cpu
    if sampler.live:
        summary["live_heap"] = live_heap_summary(sampler.live)
    summary["memory"]["before_query"] = {k: mib(before.get(k)) for k in ("py_rss", "jvm_rss", "heap_used")}
    summary["memory"]["after_query"] = {k: mib(after.get(k)) for k in ("py_rss", "jvm_rss", "heap_used")}
    summary["log"] = {"bytes": log_bytes, "write_s": round(write_s, 1)}
    lw = ckpt / "lowwater"
    summary["checkpoint"] = {
        "state_files_max": sampler.max_state_files,
        "batch_records": len(list((lw / "batches").glob("*.json"))),
        "batch_records_bytes": sum(f.stat().st_size for f in (lw / "batches").glob("*.json")),
        "metrics_jsonl_bytes": (lw / "metrics.jsonl").stat().st_size,
        "spark_checkpoint_bytes": sum(f.stat().st_size for f in (ckpt / "spark").rglob("*") if f.is_file()),
        "spark_checkpoint_files": sum(1 for f in (ckpt / "spark").rglob("*") if f.is_file()),
    }
    log("checking the accounting")
    summary["accounting"] = accounting(work / "results", work / "late", events)

    import run as R

    result = {
        "command": " ".join(["benchmarks/soak.py", *(argv if argv is not None else sys.argv[1:])]),
        "started_utc": started_utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": R.machine(spark),
        "config": config,
        "summary": summary,
        "batches": series,
        "samples": sampler.samples,
    }
    if sampler.live:
        result["live_heap_histograms"] = sampler.live
    result["machine"]["uncommitted_in_src_at_start"] = dirty
    result["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "soak-" + started_utc.strftime("%Y%m%dT%H%M%SZ") + ("-quick" if args.quick else "")
    text = json.dumps(result, indent=None, separators=(",", ":"), default=str)
    (out / f"{stem}.json").write_text(text + "\n")
    try:
        plot(result, out / f"{stem}.png")
    except Exception as e:  # the plot is a convenience
        log(f"no plot: {e}")
    print(json.dumps(summary, indent=1, default=str))
    log(f"wrote {out / stem}.json ({len(text) / 1024:.0f} KiB)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if summary["accounting"]["all_accounted"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
