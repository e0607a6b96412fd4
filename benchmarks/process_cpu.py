"""Where a command's CPU goes, by kind of process and by JVM thread: for the test suite's time.

    python3 benchmarks/process_cpu.py OUT.json -- bash .ci/run
    python3 benchmarks/process_cpu.py OUT.json --threads -- .venv/bin/python -m pytest -p no:xdist tests/spark

Runs the command and samples ``/proc`` every ``--every`` seconds until it ends. Every process on
the machine that is alive at a sample is put in a kind by its command line: a JVM by the
Python process that started it (``jvm:xdist-worker``: a test session's, ``jvm:crash_job``, ...),
PySpark's Python workers the same way (``pyworker:...``), the servers the tests start
(``kafka``, ``hdfs``, ``postgres``, a standalone cluster's ``spark-master``, ``spark-worker``,
``spark-executor``), Python processes by their script. A process counts its CPU (user + system)
as of the last sample that saw it, so one that lived less than a sample counts little or
nothing: the figures are lower bounds. A process already running when the command started
counts only the CPU it used after. With ``--threads``, the command's own process tree's
JVM threads are also summed by name (``C2 CompilerThre``, ``stream executio``, ``Executor task``, ...).

Writes ``{"seconds": wall time, "exit": exit code, "kinds": {kind: CPU s}, "threads": {...}}``
to OUT.json and prints the kinds. A diagnostic: it runs on any Linux, with no dependency.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")
SCRIPTS = ("kafka_crash_job", "crash_job", "several_sources_job", "cluster_job", "class_archive",
           "archive_workload", "pytest", "lowwater")


def _stat(pid: int | str, task: str | None = None) -> tuple[str, int, float] | None:
    """(name, parent pid, CPU seconds) of a process, or of one of its threads."""
    path = f"/proc/{pid}/task/{task}/stat" if task else f"/proc/{pid}/stat"
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    name, rest = text[text.index("(") + 1:text.rindex(")")], text.rsplit(")", 1)[1].split()
    return name, int(rest[1]), (int(rest[11]) + int(rest[12])) / HZ


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _script(cmd: str) -> str:
    found = next((s for s in SCRIPTS if s in cmd), None)
    if found is None and " -c " in f" {cmd} ":
        return "xdist-worker"  # execnet starts each worker as python -c
    return found or os.path.basename(cmd.split(" ")[0]) or "?"


def _starter(pid: int) -> str:
    """The script of the nearest Python ancestor that is not PySpark's own."""
    for _ in range(10):
        st = _stat(pid)
        if st is None or st[1] <= 1:
            return "?"
        pid = st[1]
        cmd = _cmdline(pid)
        if "python" in cmd and "pyspark" not in cmd:
            return _script(cmd)
    return "?"


def kind(pid: int, cmd: str) -> str:
    exe = os.path.basename(cmd.split(" ")[0])
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd or "pyspark.sql.worker" in cmd:
        return "pyworker:" + _starter(pid)
    if exe == "java":
        for needle, name in (("kafka.Kafka", "kafka"), ("MiniDFS", "hdfs"), ("hdfs", "hdfs"),
                             ("deploy.master", "spark-master"), ("deploy.worker", "spark-worker"),
                             ("CoarseGrainedExecutorBackend", "spark-executor")):
            if needle in cmd and "SparkSubmit" not in cmd:
                return name
        return "jvm:" + _starter(pid)
    if exe.startswith("postgres") or "postgres:" in cmd:
        return "postgres"
    if exe.startswith("python"):
        return "py:" + _script(cmd)
    return "other:" + exe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], usage="%(prog)s OUT [--threads] -- COMMAND")
    parser.add_argument("out")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--threads", action="store_true", help="also the JVM threads of the command's tree")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    command = argv[cut + 1:]
    if not command:
        parser.error("give the command after --")
    before = {int(d): st[2] for d in os.listdir("/proc") if d.isdigit() and (st := _stat(d)) is not None}
    started = time.monotonic()
    proc = subprocess.Popen(command)
    seen: dict[int, tuple[str, float]] = {}
    threads: dict[tuple[int, str], tuple[str, float]] = {}
    ours = {proc.pid}
    while True:
        done = proc.poll() is not None
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            pid = int(d)
            st = _stat(pid)
            if st is None:
                continue
            if st[1] in ours:
                ours.add(pid)
            cpu = st[2] - before.get(pid, 0.0)
            if pid in seen:
                seen[pid] = (seen[pid][0], cpu)
            elif cmd := _cmdline(pid):
                seen[pid] = (kind(pid, cmd), cpu)
            if args.threads and pid in ours and seen.get(pid, ("",))[0].startswith("jvm"):
                for task in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else ():
                    t = _stat(pid, task)
                    if t is not None:
                        threads[(pid, task)] = (re.sub(r"[#\-]?\d+$", "", t[0]).strip(), t[2])
        if done:
            break
        time.sleep(args.every)
    kinds: collections.Counter[str] = collections.Counter()
    for k, cpu in seen.values():
        kinds[k] += cpu
    by_thread: collections.Counter[str] = collections.Counter()
    for name, cpu in threads.values():
        by_thread[name] += cpu
    result = {"seconds": round(time.monotonic() - started, 1), "exit": proc.returncode,
              "kinds": {k: round(v, 1) for k, v in kinds.most_common() if v >= 0.05},
              "threads": {k: round(v, 1) for k, v in by_thread.most_common() if v >= 0.05}}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    for k, v in list(result["kinds"].items())[:25]:
        print(f"{v:9.1f} {k}")
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
