"""CPU time of the driver and every process under it, sampled in the background.

The benchmark machine is shared: other jobs may run while a cell is measured, which inflates
wall-clock batch times for reasons that have nothing to do with the engine. CPU seconds are
much less sensitive to that, so every batch gets both: its wall time from Spark's progress, and
the CPU used during it, integrated from samples taken every ``interval_s``.

What is counted: the Python driver, the JVM it started and **every process under the JVM**,
the executors' Python workers (``pyspark.daemon`` and its forks), where lowwater's per-lane and
per-key Python runs. A worker that exits is still counted, through its parent's reaped-children
time. Each sample also keeps the three parts apart (``driver``, ``jvm``, ``workers``).

Until session 7 this sampler counted the JVM and the driver only (``/proc/<pid>/stat`` utime +
stime of those two), so it did not see the Python workers: ratios measured with it flatter every
path that runs Python on the executors (the keyed path most).
"""

from __future__ import annotations

import bisect
import datetime as dt
import os
import threading
import time
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")
PARTS = ("driver", "jvm", "workers")


def _proc_tree() -> dict[int, tuple[int, float, float]]:
    """Every process: pid -> (parent pid, its own CPU s, the CPU s of its reaped children)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(d)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK,
                       (int(fields[13]) + int(fields[14])) / _TICK)
    return out


def descendants(tree: dict[int, tuple[int, float, float]], root: int) -> list[int]:
    """``root`` and every process under it."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in tree.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


class CpuSampler:
    def __init__(self, jvm_pid: int, interval_s: float = 0.05) -> None:
        self.jvm_pid = jvm_pid
        self.driver_pid = os.getpid()
        self.interval_s = interval_s
        self.times: list[float] = []
        self.cpu: list[float] = []
        self.parts: dict[str, list[float]] = {p: [] for p in PARTS}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="cpu-sampler")

    @classmethod
    def for_session(cls, spark: Any) -> CpuSampler:
        return cls(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))

    def _sample(self) -> None:
        tree = _proc_tree()
        now = time.time()
        under_jvm = set(descendants(tree, self.jvm_pid)) - {self.jvm_pid}
        # the driver's own children other than the JVM (spark-submit's shell, if any) count as driver
        rest = set(descendants(tree, self.driver_pid)) - under_jvm - {self.jvm_pid}

        def cpu(pids: set[int], reaped: bool = True) -> float:
            return sum(tree[p][1] + (tree[p][2] if reaped else 0.0) for p in pids if p in tree)

        # the JVM's reaped children (a daemon that exited) are workers' time, not the JVM's
        jvm_own = tree[self.jvm_pid][1] if self.jvm_pid in tree else 0.0
        jvm_reaped = tree[self.jvm_pid][2] if self.jvm_pid in tree else 0.0
        parts = {"driver": cpu(rest), "jvm": jvm_own, "workers": cpu(under_jvm) + jvm_reaped}
        self.times.append(now)
        for p in PARTS:
            self.parts[p].append(parts[p])
        self.cpu.append(sum(parts.values()))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            time.sleep(self.interval_s)

    def __enter__(self) -> CpuSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def at(self, t: float, series: list[float] | None = None) -> float:
        """CPU seconds at wall time ``t`` (linear between samples), of all or of one part's ``series``."""
        cpu = self.cpu if series is None else series
        i = bisect.bisect_left(self.times, t)
        if i <= 0:
            return cpu[0]
        if i >= len(self.times):
            return cpu[-1]
        t0, t1 = self.times[i - 1], self.times[i]
        c0, c1 = cpu[i - 1], cpu[i]
        return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)

    @staticmethod
    def _span(progress: dict[str, Any]) -> tuple[float, float] | None:
        stamp = progress.get("timestamp")
        d = progress.get("durationMs", {}).get("triggerExecution")
        if not stamp or d is None:
            return None
        start = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc).timestamp()
        return start, start + d / 1000.0

    def batch_cpu_ms(self, progress: dict[str, Any]) -> float | None:
        """CPU used during one micro-batch (all processes), from its progress ``timestamp`` and trigger duration."""
        span = self._span(progress)
        if span is None:
            return None
        return round((self.at(span[1]) - self.at(span[0])) * 1000.0, 1)

    def batch_cpu_parts_ms(self, progress: dict[str, Any]) -> dict[str, float] | None:
        """The same, per part: ``driver``, ``jvm``, ``workers``."""
        span = self._span(progress)
        if span is None:
            return None
        return {p: round((self.at(span[1], s) - self.at(span[0], s)) * 1000.0, 1) for p, s in self.parts.items()}
