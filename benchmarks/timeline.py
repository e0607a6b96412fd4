"""Where a micro-batch's time goes: each Spark job and stage of a benchmark run, in order, with
the driver's own steps between them and the JVM's CPU by thread.

    .venv/bin/python benchmarks/timeline.py native  --keys 100000 --rows 1000000 --batches 7
    .venv/bin/python benchmarks/timeline.py keyed   --keys 10000  --rows 100000  --batches 8
    .venv/bin/python benchmarks/timeline.py spark   --keys 100000 --rows 1000000 --batches 7   # Spark's own
    .venv/bin/python benchmarks/timeline.py spark-sessions --keys 10000 --rows 100000 --batches 8

Runs one engine in this process on the log ``scale.py`` (``native``, ``spark``) or
``sessions.py`` (``keyed``, ``spark-sessions``) would write, on ``local[2]``, then prints from
Spark's REST API:

* per job: the gap since the previous job ended, its duration, tasks, executor CPU and run
  time; with ``--stages`` each stage's start, duration and records in and out, with
  ``--tasks`` each task of the last steady batch's stages (skew shows there);
* between the jobs, when each batch's driver steps began and ended (``on_batch`` and the
  processor's ``run``), with Spark's count of compiled classes at each start;
* the JVM threads' CPU (``/proc``), summed by thread name: JIT compilers, task threads, GC.

A diagnostic, not a benchmark: no ratios. The figures in docs/performance.md that name it
came from it.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import glob
import json
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import harness as H

WRAPPED = [("lowwater.spark.engine", "_BatchDriver", "on_batch"), ("lowwater.spark.native", "NativeProcessor", "run"),
           ("lowwater.spark.keyed", "KeyedProcessor", "_run"), ("lowwater.spark.engine", None, "_deliver")]


def _when(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text.replace("GMT", ""), "%Y-%m-%dT%H:%M:%S.%f")


class Recorder:
    """The driver's steps (wrapped functions) and the JVM's CPU per thread, while a run goes."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.events: list[tuple[float, str]] = []
        self.ticks: dict[tuple[str, str], int] = {}
        self.stop = threading.Event()
        self.jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
        self.compiles = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()

    def wrap(self, module: str, cls: str | None, name: str) -> None:
        import importlib

        owner: Any = importlib.import_module(module)
        if cls is not None:
            owner = getattr(owner, cls)
        f = getattr(owner, name)

        def wrapped(*a: Any, **kw: Any) -> Any:
            self.events.append((time.time(), f"begin {name} (compiled classes: {self.compiles.getCount()}, "
                                             f"JIT CPU so far: {self.jit_ms()} ms)"))
            try:
                return f(*a, **kw)
            finally:
                self.events.append((time.time(), f"end   {name}"))

        setattr(owner, name, wrapped)

    def jit_ms(self) -> int:
        """The JIT compilers' CPU so far, from the last sample."""
        return sum(t for (_, name), t in list(self.ticks.items()) if "CompilerThre" in name) * 10

    def sample(self) -> None:
        while not self.stop.wait(0.2):
            for d in glob.glob(f"/proc/{self.jvm_pid}/task/*"):
                try:
                    stat, name = Path(d, "stat").read_text(), Path(d, "comm").read_text().strip()
                except OSError:
                    continue
                fields = stat[stat.rindex(")") + 2:].split()
                self.ticks[(d, name)] = int(fields[11]) + int(fields[12])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine", choices=("native", "spark", "keyed", "spark-sessions"))
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--partitions", type=int, help="source partitions (default: scale.py's or sessions.py's)")
    ap.add_argument("--stages", action="store_true", help="each job's stages")
    ap.add_argument("--tasks", action="store_true", help="the tasks of the last batch's stages")
    ap.add_argument("--wrap", action="append", default=[], metavar="MODULE:CLASS.METHOD",
                    help="also mark when this driver step begins and ends "
                    "(e.g. lowwater.spark.native:NativeProcessor._fires)")
    ap.add_argument("--jfr", metavar="FILE", help="record the driver JVM with Java Flight Recorder (profile settings) "
                    "into FILE; read it with `jfr print --events jdk.ExecutionSample FILE`")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lowwater-timeline-"))
    try:
        return _run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # a run's log and checkpoint are hundreds of MB


def _wrapped(text: str) -> tuple[str, str | None, str]:
    """``MODULE:CLASS.METHOD`` or ``MODULE:FUNCTION`` as a :data:`WRAPPED` entry."""
    module, _, name = text.partition(":")
    owner, _, method = name.rpartition(".")
    return module, owner or None, method


def _run(args: argparse.Namespace, work: Path) -> int:
    import scale
    import sessions

    from lowwater.spark.session import get_or_create_session

    window = sessions if args.engine in ("keyed", "spark-sessions") else scale
    partitions = args.partitions or window.PARTITIONS
    H.write_log(work / "log", H.stream_for(partitions, args.keys, args.rows, window.SPAN_MS, window.BOUND_MS),
                args.batches, args.rows)
    conf = {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g",
            "spark.ui.retainedJobs": "10000", "spark.ui.retainedStages": "10000"}
    if args.jfr:
        from lowwater.spark.session import LOG4J2

        conf["spark.driver.extraJavaOptions"] = (f"-Dlog4j2.configurationFile=file:{LOG4J2} "
                                                 f"-XX:StartFlightRecording=settings=profile,filename={args.jfr}")
    spark = get_or_create_session(master="local[2]", app_name=f"timeline-{args.engine}", conf=conf)
    rec = Recorder(spark)
    for spec in [*WRAPPED, *(_wrapped(w) for w in args.wrap)]:
        rec.wrap(*spec)
    threading.Thread(target=rec.sample, daemon=True).start()
    log, ckpt = work / "log", work / "ckpt"
    if args.engine == "native":
        H.lowwater(spark, log, ckpt, partitions, scale.WINDOW_MS, scale.BOUND_MS)
    elif args.engine == "spark":
        H.spark_native(spark, log, ckpt, partitions, scale.WINDOW_MS, scale.BOUND_MS)
    elif args.engine == "keyed":
        sessions._lowwater_sessions(spark, log, ckpt, "keyed")
    else:
        sessions._spark_sessions(spark, log, ckpt)
    rec.stop.set()

    sc = spark.sparkContext
    api = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    jobs = sorted(json.load(urllib.request.urlopen(f"{api}/jobs")), key=lambda j: j["jobId"])
    stages = {s["stageId"]: s for s in json.load(urllib.request.urlopen(f"{api}/stages"))
              if s["status"] == "COMPLETE"}
    events = [(datetime.datetime.fromtimestamp(t, datetime.UTC).replace(tzinfo=None), e) for t, e in rec.events]
    last_batch_stages: list[int] = []
    prev = None
    for j in jobs:
        start, end = _when(j["submissionTime"]), _when(j["completionTime"])
        while events and events[0][0] <= start:
            at, what = events.pop(0)
            print(f"    {at:%H:%M:%S.%f}"[:-3], what)
            if what.startswith("begin on_batch"):
                last_batch_stages = []
        mine = [stages[s] for s in sorted(j["stageIds"]) if s in stages]
        last_batch_stages += [s["stageId"] for s in mine]
        gap = (start - prev).total_seconds() * 1000 if prev else 0
        took = (end - start).total_seconds() * 1000
        print(f"job {j['jobId']:4} {start:%H:%M:%S.%f}"[:-3] + f" gap {gap:5.0f} ms, {took:6.0f} ms, "
              f"{j['numTasks']:3} tasks, executor CPU {sum(s['executorCpuTime'] for s in mine) / 1e6:6.0f} ms, "
              f"run {sum(s['executorRunTime'] for s in mine):6} ms  {j['name'][:40]}")
        if args.stages:
            for s in mine:
                a, b = _when(s["submissionTime"]), _when(s["completionTime"])
                print(f"      stage {s['stageId']:4} +{(a - start).total_seconds() * 1000:5.0f} ms, "
                      f"{(b - a).total_seconds() * 1000:6.0f} ms, {s['numTasks']:3} tasks, CPU "
                      f"{s['executorCpuTime'] / 1e6:5.0f} ms, run {s['executorRunTime']:5} ms; records in "
                      f"{s['inputRecords']}, shuffle read {s['shuffleReadRecords']}, shuffle write "
                      f"{s['shuffleWriteRecords']}, out {s['outputRecords']}")
        prev = end
    for at, what in events:
        print(f"    {at:%H:%M:%S.%f}"[:-3], what)
    if args.tasks:
        for sid in last_batch_stages:
            for t in sorted(json.load(urllib.request.urlopen(f"{api}/stages/{sid}/0/taskList")),
                            key=lambda t: t["launchTime"]):
                m = t.get("taskMetrics", {})
                print(f"task {sid}.{t['index']} at {t['launchTime'][11:23]}: {t.get('duration')} ms, run "
                      f"{m.get('executorRunTime')} ms, CPU {m.get('executorCpuTime', 0) // 1_000_000} ms, "
                      f"shuffle read {m.get('shuffleReadMetrics', {}).get('recordsRead')} records")
    by_name: collections.Counter[str] = collections.Counter()
    for (_, name), ticks in rec.ticks.items():
        by_name[re.sub(r"[0-9]+", "#", name)] += ticks * 10  # clock ticks of 10 ms
    print("JVM CPU by thread (ms):")
    for name, ms in by_name.most_common(12):
        print(f"  {ms:8} {name}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
