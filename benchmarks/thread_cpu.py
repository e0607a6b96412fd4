"""The JVM's CPU in each micro-batch, by thread group: JIT compilers, task threads, the stream
execution thread (the driver's planning), garbage collection and the rest.

    .venv/bin/python benchmarks/thread_cpu.py native --keys 1000 --rows 1000000 --batches 10
    .venv/bin/python benchmarks/thread_cpu.py spark  --keys 1000 --rows 1000000 --batches 10

Runs one engine in this process (``local[2]``) on the log ``scale.py`` would write, samples
``/proc/<jvm>/task/*/stat`` every 50 ms, and prints per batch that read input Spark's trigger
time and each group's CPU milliseconds between the batch's start and end. A diagnostic, not a
benchmark: no ratios (``timeline.py`` gives the whole run's CPU by thread and the jobs).
``LOWWATER_BENCH_CONF`` (a JSON object of Spark settings) is applied to the session, e.g.
``'{"spark.driver.extraJavaOptions": "-XX:+PrintCompilation"}'``.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import harness as H

GROUPS = ("jit", "task", "stream", "gc", "other")
_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def group(thread: str) -> str:
    """A JVM thread's group, from its name (``comm``)."""
    if "Compiler" in thread:
        return "jit"
    if thread.startswith("Executor task"):
        return "task"
    if thread.startswith("stream exec"):
        return "stream"
    if thread.startswith(("GC ", "G1 ")):
        return "gc"
    return "other"


def sample(pid: int, seen: dict[str, tuple[str, float]]) -> dict[str, float]:
    """CPU milliseconds so far of every thread of ``pid`` seen until now, summed by group: a
    thread that has ended keeps its last figure (``seen``, thread id -> group and ms)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        seen[tid] = (group(stat[stat.index("(") + 1:stat.rindex(")")]), (int(fields[11]) + int(fields[12])) * _TICK_MS)
    out: collections.Counter[str] = collections.Counter()
    for name, ms in seen.values():
        out[name] += ms
    return dict(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine", choices=("native", "spark"))
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=10)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lowwater-thread-cpu-"))
    try:
        return _run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # a run's log and checkpoint are hundreds of MB


def _run(args: argparse.Namespace, work: Path) -> int:
    import scale

    from lowwater.spark.session import get_or_create_session

    log, ckpt = work / "log", work / "ckpt"
    H.write_log(log, H.stream_for(scale.PARTITIONS, args.keys, args.rows, scale.SPAN_MS, scale.BOUND_MS),
                args.batches, args.rows)
    conf = {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g",
            **json.loads(os.environ.get("LOWWATER_BENCH_CONF", "{}"))}
    spark = get_or_create_session(master="local[2]", app_name=f"thread-cpu-{args.engine}", conf=conf)
    pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    samples: list[tuple[float, dict[str, float]]] = []
    stop = threading.Event()
    threads: dict[str, tuple[str, float]] = {}

    def run() -> None:
        while not stop.wait(0.05):
            samples.append((time.time(), sample(pid, threads)))

    sampler = threading.Thread(target=run, daemon=True)
    sampler.start()
    if args.engine == "native":
        *_, progress, _wall = H.lowwater(spark, log, ckpt, scale.PARTITIONS, scale.WINDOW_MS, scale.BOUND_MS)
    else:
        _, progress, _wall = H.spark_native(spark, log, ckpt, scale.PARTITIONS, scale.WINDOW_MS, scale.BOUND_MS)
    stop.set()
    sampler.join()
    times = [t for t, _ in samples]

    def at(t: float) -> dict[str, float]:
        return samples[min(len(samples) - 1, bisect.bisect_left(times, t))][1]

    print("batch      ms  " + "  ".join(f"{g:>6}" for g in GROUPS))
    for p in progress:
        p = p if isinstance(p, dict) else json.loads(p.json)
        if not int(p.get("numInputRows", 0)):
            continue
        start = dt.datetime.strptime(p["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()
        ms = int(p["durationMs"]["triggerExecution"])
        a, b = at(start), at(start + ms / 1000)
        print(f"{p['batchId']:5} {ms:7}  " + "  ".join(f"{b.get(g, 0) - a.get(g, 0):6.0f}" for g in GROUPS))
    print("whole run  " + "  ".join(f"{g} {samples[-1][1].get(g, 0):.0f}" for g in GROUPS))
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
