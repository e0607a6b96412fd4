"""CPU time of the Spark JVM and this driver process, sampled in the background.

The benchmark machine is shared: other jobs may run while a cell is measured, which inflates
wall-clock batch times for reasons that have nothing to do with the engine. CPU seconds spent
by the JVM (all executor threads in ``local[2]``) plus the Python driver are much less
sensitive to that, so every batch gets both: its wall time from Spark's progress, and the CPU
used during it, integrated from samples taken every ``interval_s``.
"""

from __future__ import annotations

import bisect
import datetime as dt
import os
import threading
import time
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")


def _proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime of all threads


class CpuSampler:
    def __init__(self, jvm_pid: int, interval_s: float = 0.05) -> None:
        self.pids = [jvm_pid, os.getpid()]
        self.interval_s = interval_s
        self.times: list[float] = []
        self.cpu: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="cpu-sampler")

    @classmethod
    def for_session(cls, spark: Any) -> CpuSampler:
        return cls(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))

    def _sample(self) -> None:
        self.times.append(time.time())
        self.cpu.append(sum(_proc_cpu_s(p) for p in self.pids))

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

    def at(self, t: float) -> float:
        """CPU seconds at wall time ``t`` (linear between samples)."""
        i = bisect.bisect_left(self.times, t)
        if i <= 0:
            return self.cpu[0]
        if i >= len(self.times):
            return self.cpu[-1]
        t0, t1 = self.times[i - 1], self.times[i]
        c0, c1 = self.cpu[i - 1], self.cpu[i]
        return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)

    def batch_cpu_ms(self, progress: dict[str, Any]) -> float | None:
        """CPU used during one micro-batch, from its progress ``timestamp`` and trigger duration."""
        stamp = progress.get("timestamp")
        d = progress.get("durationMs", {}).get("triggerExecution")
        if not stamp or d is None:
            return None
        start = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc).timestamp()
        return round((self.at(start + d / 1000.0) - self.at(start)) * 1000.0, 1)
