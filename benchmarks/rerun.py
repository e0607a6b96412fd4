"""A rerun with nothing new: how long ``available_now`` takes on a checkpoint that has read everything.

    .venv/bin/python benchmarks/rerun.py --rounds 4 '{"before": {"src": "/tmp/old/src"}, "after": {}}'

A job scheduled more often than its data arrives mostly runs this. Each variant (``src``: the
directory put first on the child's ``PYTHONPATH``, as in ``ab.py``; default this checkout's)
gets a checkpoint of its own over one small partitioned log (``--keys`` keys, tumbling 10 s
windows summed, a ``DirectorySink`` that skips empty batches), run once to the log's end; then
each round reruns every variant in turn, the order reversed every other round, each in a fresh
Python process and JVM. Prints, per run, the session's start, ``execute``'s wall time and the
JVM's CPU seconds (from ``/proc``, start-up included), and per variant their medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def child(log: str, ckpt: str, out: str) -> dict[str, Any]:
    """One run on ``ckpt``, in this (fresh) process."""
    started = time.monotonic()
    from lowwater.api import StreamExecutionEnvironment
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.spark.engine import SparkRuntime
    from lowwater.spark.session import get_or_create_session
    from lowwater.spark.sinks import DirectorySink
    from lowwater.spark.sources import PartitionedLogSource

    spark = get_or_create_session(master="local[2]", app_name="rerun")
    session_s = time.monotonic() - started
    env = StreamExecutionEnvironment()
    (env.from_source(PartitionedLogSource(log, [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")]),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").window(TumblingEventTimeWindows.of(10_000)).sum("value")
     .add_sink(DirectorySink(out, empty_batches=False)))
    begun = time.monotonic()
    job = SparkRuntime(ckpt, spark=spark).execute(env)
    execute_s = time.monotonic() - begun
    pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    jvm_cpu_s = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    out_ = {"session_s": round(session_s, 2), "execute_s": round(execute_s, 2), "jvm_cpu_s": round(jvm_cpu_s, 1),
            "batches": len(job.metrics()), "path": job.path}
    spark.stop()
    return out_


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="?", default='{"lowwater": {}}',
                    help='JSON: name -> {"src": another checkout\'s src}')
    ap.add_argument("--keys", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", nargs=3, metavar=("LOG", "CKPT", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(*args.child)), flush=True)
        return 0

    import harness as H

    from lowwater.io import PartitionedLogWriter

    variants: dict[str, dict[str, Any]] = json.loads(args.variants)
    work = Path(tempfile.mkdtemp(prefix="lowwater-rerun-"))
    try:
        log = work / "log"
        writer = PartitionedLogWriter(log, "jsonl")
        for p in range(2):
            writer.append(p, [{"key": f"k{k}", "ts": 1_000 * i + k, "value": 1}
                              for i in range(30) for k in range(p, args.keys, 2)])

        def run(name: str) -> dict[str, Any]:
            src = variants[name].get("src", str(HERE.parent / "src"))
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
            return H.run_child(__file__, [str(log), str(work / f"ck-{name}"), str(work / f"out-{name}")],
                               f"rerun {name}", env=env)

        for name in variants:  # to the log's end
            print(f"{name:>12} first run: {run(name)}", flush=True)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
        names = list(variants)
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                got = run(name)
                runs[name].append(got)
                print(f"{name:>12} round {r + 1}: {got}", flush=True)
        for name, rs in runs.items():
            print(f"{name:>12}: median execute {statistics.median(x['execute_s'] for x in rs):.2f} s, "
                  f"JVM CPU {statistics.median(x['jvm_cpu_s'] for x in rs):.1f} s, "
                  f"session {statistics.median(x['session_s'] for x in rs):.2f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
