"""``lowwater status``: a checkpoint's watermarks, idle partitions, state and last batches as text."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.metrics.accounting import from_lines, operator_lines, operator_names
from lowwater.metrics.line import OPERATOR_COUNTERS, batches_in, processes
from lowwater.metrics.log import read_checkpoint
from lowwater.observe.fmt import fmt_bytes, fmt_duration, fmt_time, fmt_watermark, partition_order

__all__ = ["batch_row", "lag_ms", "render_status", "status", "status_json", "summarize"]

BATCH_HEADER = ("batch", "processing time", "combined watermark", "lag", "idle", "rows in", "late", "fired",
                "duration")


def lag_ms(line: Mapping[str, Any]) -> int | None:
    """How far the combined watermark is behind processing time (``processing_time - watermark``)."""
    w, now = line.get("combined_watermark"), line.get("processing_time_ms")
    if w is None or now is None or w in (MIN_TIMESTAMP, MAX_TIMESTAMP):
        return None
    return int(now) - int(w)


def batch_row(line: dict[str, Any]) -> tuple[str, ...]:
    """One batch as the cells of :data:`BATCH_HEADER`."""
    idle = ",".join(line.get("idle_partitions") or []) or "-"
    return (
        str(line["batch_id"]) + (" (end)" if line.get("end_of_input") else ""),
        fmt_time(line.get("processing_time_ms")),
        fmt_watermark(line.get("combined_watermark")),
        fmt_duration(lag_ms(line)),
        idle,
        str(line.get("rows_in", 0)),
        str(line.get("rows_late", 0)),
        str(line.get("windows_fired", 0)),
        fmt_duration(line.get("duration_ms")),
    )


def summarize(lines: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Totals over all batches and the watermarks after the last batch that read data."""
    data = [x for x in lines if not x.get("end_of_input")]
    current = data[-1] if data else (lines[-1] if lines else None)
    # the end of input is final for the checkpoint (its MAX watermark fired every window): a later
    # run's batches come after its step, and find every element late
    ended = next((x for x in lines if x.get("end_of_input")), None)
    late_by_partition: dict[str, int] = {}
    for x in lines:
        for p, n in (x.get("rows_late_by_partition") or {}).items():
            late_by_partition[p] = late_by_partition.get(p, 0) + int(n)
    return {
        "batches": sum(batches_in(x) for x in lines),  # a folded line stands for many (metrics.log)
        "first_batch": lines[0].get("folded_from", lines[0]["batch_id"]) if lines else None,
        "last_batch": lines[-1]["batch_id"] if lines else None,
        "end_of_input": ended is not None,
        "path": next((x.get("path") for x in reversed(lines) if x.get("path")), None),
        "current": current,
        "rows_in": sum(int(x.get("rows_in") or 0) for x in lines),
        "rows_late": sum(int(x.get("rows_late") or 0) for x in lines),
        "rows_late_by_partition": late_by_partition,
        "rows_dead_lettered": sum(int(x.get("rows_dead_lettered") or 0) for x in lines),
        "windows_fired": sum(int(x.get("windows_fired") or 0) for x in lines),
        "operator": "process" if processes(lines) else "window",
        "accounting": from_lines(lines),
        "final_windows_fired": ended.get("windows_fired", 0) if ended is not None else 0,
        "state": lines[-1] if lines else None,
        "operators": operator_totals(lines, current),
    }


def operator_totals(lines: Sequence[dict[str, Any]], current: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """With several window operators (:attr:`~lowwater.metrics.line.MetricsLine.operators`), each
    one's totals over ``lines``, its watermark after ``current`` (the last batch that read data),
    its open windows and state rows after the last line, and its accounting; empty with one."""
    out: dict[str, dict[str, Any]] = {}
    for name in operator_names(lines):
        own = operator_lines(lines, name)
        now = ((current or {}).get("operators") or {}).get(name) or {}
        out[name] = {**{key: sum(int(y.get(key) or 0) for y in own) for key in OPERATOR_COUNTERS},
                     "combined_watermark": now.get("combined_watermark"),
                     "open_windows": own[-1].get("open_windows"), "state_rows": own[-1].get("state_rows"),
                     "accounting": from_lines(own)}
    return out


def fired_text(n: int, process: bool) -> str:
    """What a job's ``windows_fired`` counts: a process function's are its timers (it has no window;
    it said "363 window firings" of a job without one)."""
    return f"{n} timers fired" if process else f"{n} window firings"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = (),
           indent: str = "  ") -> list[str]:
    """Columns padded to their widest cell; the ``right`` columns (numbers) right-aligned."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    out = []
    for row in (header, *rows):
        cells = [str(c).rjust(w) if i in right else str(c).ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        out.append(indent + "  ".join(cells).rstrip())
    return out


def _n(value: Any) -> str:
    return "-" if value is None else str(value)


def _operator_table(operators: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One row per window operator (:func:`operator_totals`); ``unassigned`` only when some are."""
    unassigned = any(op["rows_unassigned"] for op in operators.values())
    header = ("operator", "watermark", "rows in", "windowed", "late", "dead-lettered",
              *(("unassigned",) if unassigned else ()), "fired", "open windows", "accounting")
    rows = [(name, fmt_watermark(op["combined_watermark"]), str(op["operator_rows_in"]), str(op["rows_windowed"]),
             str(op["rows_late"]), str(op["operator_rows_dead_lettered"]),
             *((str(op["rows_unassigned"]),) if unassigned else ()), str(op["windows_fired"]),
             _n(op["open_windows"]), "balanced" if op["accounting"].balanced else str(op["accounting"]))
            for name, op in operators.items()]
    return _table(header, rows, right=tuple(range(2, len(header) - 1)))


def render_status(checkpoint: str | os.PathLike[str], lines: Sequence[dict[str, Any]], last: int = 10) -> str:
    s = summarize(lines)
    out = [f"checkpoint {checkpoint}" + (f" ({s['path']} path)" if s["path"] else "")]
    if not lines:
        out.append("no batches yet: the job has not finished a micro-batch")
        return "\n".join(out) + "\n"
    # processing-time windows still open at the end do not fire, as in Flink (docs/semantics.md)
    end = "reached (a MAX watermark fired every event-time window left open)" if s["end_of_input"] \
        else "not reached"
    out.append(f"{s['batches']} batches ({s['first_batch']}..{s['last_batch']}), end of input {end}")
    out.append(f"totals: {s['rows_in']} rows in, {s['rows_late']} late, {s['rows_dead_lettered']} dead-lettered, "
               + fired_text(s["windows_fired"], s["operator"] == "process"))
    accounting = s["accounting"]
    out.append(f"accounting: {accounting}" + (" (balanced)" if accounting.balanced else ""))
    if s["operators"]:
        out.append(f"operators ({len(s['operators'])}; above, rows in and dead letters are the job's, "
                   "the rest the first one's):")
        out += _operator_table(s["operators"])
    if s["rows_dead_lettered"]:
        from lowwater.metrics.dead_letters import describe_reasons, merge_reasons, sample_place

        out.append(f"dead letters: {describe_reasons(merge_reasons(lines))}")
        sample = next((x["dead_letter_sample"] for x in reversed(lines) if x.get("dead_letter_sample")), None)
        if sample:
            record = sample.get("record")  # none for a record that did not parse (it has no fields)
            out.append(f"  e.g. {sample_place(sample)}: {sample.get('reason')}" + (f": {record}" if record else ""))
    cur = s["current"]
    out.append("")
    out.append(f"watermarks after batch {cur['batch_id']} (processing time {fmt_time(cur['processing_time_ms'])}):")
    idle = set(cur.get("idle_partitions") or [])
    parts = cur.get("partition_watermarks") or {}
    rows = [(p, fmt_watermark(w), "idle" if p in idle else "active", str(s["rows_late_by_partition"].get(p, 0)))
            for p, w in sorted(parts.items(), key=lambda kv: partition_order(kv[0]))]
    # within a source, Flink's multiplexer: the minimum over its active partitions, a partition back
    # from idle behind it holding it at once; between sources (labelled ``source:partition``), Flink's
    # valve: a source back from idle behind the combined watermark counts once it has caught up; when
    # every partition is idle, the maximum over them (Flink 2.3). Until session 39 every job's row
    # said the valve's rule, which a single source's returning partition does not follow.
    several = any(":" in p for p in parts)
    note = ("min over active partitions; a source back from idle counts once caught up" if several
            else "min over active partitions") if parts else "no window operator"
    if parts and len(idle) == len(parts):
        note = "every partition is idle: the maximum over them"
    rows.append(("combined", fmt_watermark(cur.get("combined_watermark")), note, str(s["rows_late"])))
    out += _table(("partition", "watermark", "status", "late rows (all batches)"), rows, right=(3,))
    lag = lag_ms(cur)
    if lag is not None and lag >= 0:
        out.append(f"  the combined watermark is {fmt_duration(lag)} behind processing time")
    elif lag is not None:
        out.append(f"  the combined watermark is {fmt_duration(-lag)} ahead of processing time "
                   "(event time runs ahead of the job's clock)")
    state = s["state"]
    out.append("")
    size = state.get("state_bytes")
    # the native path counts the window starts it keeps (its windows per key are files on the executors)
    held = [f"{state['open_windows']} open windows" if state.get("open_windows") is not None else
            f"{state['open_window_starts']} open window starts" if state.get("open_window_starts") is not None
            else "- open windows"]
    if state.get("state_rows") is not None or state.get("open_window_starts") is None:
        held.append(f"{_n(state.get('state_rows'))} state rows")
    out.append(f"state after batch {state['batch_id']}: {', '.join(held)}"
               + (f", {fmt_bytes(size)} on disk" if size is not None else " (not stored on disk)"))
    shown = list(lines)[-last:] if last > 0 else []
    if shown:
        out.append("")
        out.append(f"last {len(shown)} of {len(lines)} batches:")
        out += _table(BATCH_HEADER, [batch_row(x) for x in shown], right=(3, 5, 6, 7, 8))
    return "\n".join(out) + "\n"


def status_json(checkpoint: str | os.PathLike[str], lines: Sequence[dict[str, Any]], last: int = 10) -> dict[str, Any]:
    """What ``lowwater status --json`` prints: the summary (without the state line, and with the
    accounting as data) and the last ``last`` metrics lines."""
    summary = summarize(lines)
    summary.pop("state")
    accounting = summary.pop("accounting")
    summary["accounting"] = {**dataclasses.asdict(accounting), "balanced": accounting.balanced}
    for op in summary["operators"].values():
        op["accounting"] = {**dataclasses.asdict(op["accounting"]), "balanced": op["accounting"].balanced}
    return {"checkpoint": str(checkpoint), "summary": summary, "batches": list(lines)[-last:] if last > 0 else []}


def status(checkpoint: str | os.PathLike[str], last: int = 10) -> str:
    """The text ``lowwater status CHECKPOINT`` prints."""
    return render_status(checkpoint, read_checkpoint(checkpoint), last)
