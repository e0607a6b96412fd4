"""Live progress: one line per micro-batch, read from the metrics log while a job runs.

:class:`MetricsTail` polls ``<checkpoint>/lowwater/metrics.jsonl`` from a background
thread and calls back with each new line; it needs no hook into the engine and works for
any process writing that checkpoint. :func:`progress_line` is what ``lowwater run`` prints::

     batch  combined watermark         lag       idle  rows in  late  dead  fired  duration
         3  2023-11-14 22:13:47.999    12.0 s    3        16000    12     0    150     1.2 s
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from lowwater.metrics.log import MetricsLog
from lowwater.observe.fmt import fmt_duration, fmt_watermark
from lowwater.observe.status import lag_ms

__all__ = ["PROGRESS_HEADER", "MetricsTail", "progress_line"]

_COLUMNS = ((">6", "batch"), ("<25", "combined watermark"), (">9", "lag"), ("<6", "idle"), (">8", "rows in"),
            (">6", "late"), (">6", "dead"), (">6", "fired"), (">9", "duration"))
PROGRESS_HEADER = "  ".join(f"{name:{spec}}" for spec, name in _COLUMNS).rstrip()


def progress_line(line: dict[str, Any]) -> str:
    """One batch: combined watermark, its lag behind processing time, idle partitions, rows,
    late rows, dead-lettered rows, windows fired and how long the batch took."""
    cells = (
        str(line["batch_id"]) + ("*" if line.get("end_of_input") else ""),
        fmt_watermark(line.get("combined_watermark")),
        fmt_duration(lag_ms(line)),
        ",".join(line.get("idle_partitions") or []) or "-",
        str(line.get("rows_in", 0)),
        str(line.get("rows_late", 0)),
        str(line.get("rows_dead_lettered", 0)),
        str(line.get("windows_fired", 0)),
        fmt_duration(line.get("duration_ms")),
    )
    return "  ".join(f"{c:{spec}}" for (spec, _), c in zip(_COLUMNS, cells, strict=True)).rstrip()


class MetricsTail:
    """Calls ``on_line`` with every line appended to a checkpoint's metrics log after ``start()``.

    Use as a context manager; leaving it reads what is left, so no batch is missed.
    """

    def __init__(self, checkpoint: str | os.PathLike[str], on_line: Callable[[dict[str, Any]], None],
                 interval_s: float = 0.25) -> None:
        self.log = MetricsLog(checkpoint)
        self.on_line = on_line
        self.interval_s = interval_s
        self.seen = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._follower = self.log.follow(from_end=True)
        self._lock = threading.Lock()

    def poll(self) -> int:
        with self._lock:
            lines = self._follower.poll()
            for line in lines:
                self.on_line(line)
            self.seen += len(lines)
            return len(lines)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll()

    def start(self) -> MetricsTail:
        self._thread = threading.Thread(target=self._loop, name="lowwater-metrics-tail", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.poll()

    def __enter__(self) -> MetricsTail:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
