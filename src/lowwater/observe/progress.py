"""Live progress: one line per micro-batch, read from the metrics log while a job runs.

:class:`MetricsTail` polls ``<checkpoint>/lowwater/metrics.jsonl`` from a background
thread and calls back with each new line; it needs no hook into the engine and works for
any process writing that checkpoint. :func:`progress_line` is what ``lowwater run`` prints::

     batch  combined watermark         lag       idle  rows in  late  dead  fired  duration
         3  2023-11-14 22:13:47.999    12.0 s    3        16000    12     0    150     1.2 s
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from lowwater.metrics.dead_letters import describe_reasons, merge_reasons, sample_place
from lowwater.metrics.log import MetricsLog
from lowwater.observe.fmt import fmt_duration, fmt_watermark
from lowwater.observe.status import lag_ms

__all__ = ["PROGRESS_HEADER", "MetricsTail", "dead_letter_summary", "operators_summary", "print_progress",
           "progress_line"]

_COLUMNS = ((">6", "batch"), ("<29", "combined watermark"), (">9", "lag"), ("<6", "idle"), (">8", "rows in"),
            (">6", "late"), (">6", "dead"), (">6", "fired"), (">9", "duration"))
PROGRESS_HEADER = "  ".join(f"{name:{spec}}" for spec, name in _COLUMNS).rstrip()


def progress_line(line: Mapping[str, Any]) -> str:
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


def print_progress(line: Mapping[str, Any], out: TextIO | None = None, err: TextIO | None = None) -> None:
    """What ``lowwater run`` prints for a batch: its :func:`progress_line`, then its dead letters,
    if any (a warning on ``err`` when the batch dead-lettered every row it read)."""
    out, err = out or sys.stdout, err or sys.stderr
    print(progress_line(line), file=out, flush=True)
    dead, rows_in = int(line.get("rows_dead_lettered") or 0), int(line.get("rows_in") or 0)
    if not dead:
        return
    reasons = describe_reasons(line.get("dead_letter_reasons") or {})
    sample = line.get("dead_letter_sample") or {}
    where = sample_place(sample)
    if dead == rows_in:
        record = sample.get("record")  # none for a line that does not parse: its reason says what it read
        example = f"{sample.get('reason')}" + (f", record {record}" if record and record != "null" else "")
        print(f"WARNING: batch {line['batch_id']} dead-lettered every one of its {rows_in} rows: {reasons}; "
              f"e.g. {where}: {example}; hint: check the data, and the source's declared fields and types "
              "against it", file=err, flush=True)
    else:
        print(f"        {dead} dead-lettered: {reasons}", file=out, flush=True)


def dead_letter_summary(lines: Sequence[Mapping[str, Any]], has_sink: bool) -> str | None:
    """One line on a run's dead letters (how many, why, where they are), or ``None`` without any."""
    dead = sum(int(x.get("rows_dead_lettered") or 0) for x in lines)
    if not dead:
        return None
    where = "in the dead-letter sink" if has_sink else (
        "kept nowhere; hint: add \"dead_letter_sink\": DirectorySink(...) to RUNTIME_OPTIONS to keep them")
    return f"{dead} records dead-lettered ({describe_reasons(merge_reasons(lines))}), {where}"


def operators_summary(lines: Sequence[Mapping[str, Any]]) -> str | None:
    """With several window operators, one line on each one's late rows and firings over ``lines``
    (the progress lines show the first one's), or ``None``."""
    late: dict[str, int] = {}
    fired: dict[str, int] = {}
    for x in lines:
        for name, op in (x.get("operators") or {}).items():
            late[name] = late.get(name, 0) + int(op.get("rows_late") or 0)
            fired[name] = fired.get(name, 0) + int(op.get("windows_fired") or 0)
    if not late:
        return None
    each = "; ".join(f"{name}: {late[name]} late, {fired[name]} fired" for name in late)
    return f"{len(late)} operators (the lines above are the first one's): {each}"


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
