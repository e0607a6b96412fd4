"""The watermark timeline as a picture (.png, .svg, or .html with the SVG inline).

Top panel: each partition's watermark and the combined watermark (their minimum over
active partitions, between sources a source back from idle once it has caught up; the maximum
when all are idle) against processing
time, one step per micro-batch, idle stretches shaded, and late elements as crosses on the
combined watermark they were judged against (the one emitted at the end of the previous
batch). Bottom panel: per batch, the rows read, the late rows and the windows fired.
"""

from __future__ import annotations

import html
import io
import itertools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lowwater.core.errors import ConfigurationError
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.observe.fmt import EPOCH_LIKE_MS, fmt_time, partition_order

COMBINED_LABEL = "combined watermark (min over active partitions, max when all are idle)"
"""The combined line's legend: Flink's multiplexer within a source (until session 39 it stated the valve's
caught-up rule, which holds only between sources)."""

__all__ = ["FORMATS", "plot_watermarks", "series"]

FORMATS = (".png", ".svg", ".html")


def _as_lines(batches: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Metrics lines as they are, or batch records (``{"clock_ms", "metrics"}``) turned into lines."""
    from lowwater.metrics.log import lines_from_records

    if any("metrics" in b for b in batches):
        return lines_from_records([dict(b) for b in batches])
    return sorted((dict(b) for b in batches), key=lambda b: b["batch_id"])


def series(batches: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The plotted data, from metrics lines (or batch records).

    ``x``: processing time in seconds since the first batch; watermarks in seconds of
    event time after ``origin_ms``; ``None`` where there is no watermark (``MIN``).
    The end-of-input batch (a ``MAX`` watermark) has no point on the watermark lines.
    """
    lines = _as_lines(batches)
    rows = [b for b in lines if not b.get("end_of_input")]
    end = next((b for b in lines if b.get("end_of_input")), None)
    base = rows or lines
    if not base:
        return {"x": [], "batch_ids": [], "partitions": {}, "combined": [], "idle": {}, "late": [], "fired": [],
                "rows_in": [], "rows_late": [], "origin_ms": 0, "start_ms": None, "end_of_input": None}
    t0 = int(base[0]["processing_time_ms"] or 0)

    def px(b: Mapping[str, Any]) -> float:
        return (int(b["processing_time_ms"] or 0) - t0) / 1000

    marks = [w for b in rows for w in (b.get("combined_watermark"), *(b.get("partition_watermarks") or {}).values())]
    finite = [w for w in marks if w is not None and w not in (MIN_TIMESTAMP, MAX_TIMESTAMP)]
    origin = (min(finite) // 1000) * 1000 if finite else 0

    def ev(ms: int | None) -> float | None:
        return None if ms is None or ms in (MIN_TIMESTAMP, MAX_TIMESTAMP) else (ms - origin) / 1000

    parts = sorted({p for b in rows for p in b.get("partition_watermarks") or {}}, key=partition_order)
    return {
        "x": [px(b) for b in rows],
        "batch_ids": [b["batch_id"] for b in rows],
        "origin_ms": origin,
        "start_ms": t0,
        "partitions": {p: [ev((b.get("partition_watermarks") or {}).get(p)) for b in rows] for p in parts},
        "idle": {p: [p in (b.get("idle_partitions") or []) for b in rows] for p in parts},
        "combined": [ev(b.get("combined_watermark")) for b in rows],
        # late elements of batch k were judged against the combined watermark after batch k-1
        "late": [(px(b), ev(b.get("watermark_before")), int(b["rows_late"])) for b in rows if b.get("rows_late")],
        "fired": [(px(b), int(b["windows_fired"])) for b in lines if b.get("windows_fired")],
        "rows_in": [int(b.get("rows_in") or 0) for b in rows],
        "rows_late": [int(b.get("rows_late") or 0) for b in rows],
        "end_of_input": px(end) if end is not None else None,
    }


MARKED_BATCHES = 200
"""Up to this many batches a plot marks each one's watermarks and labels each one's late count."""


def _runs(flags: Sequence[bool]) -> list[tuple[int, int]]:
    """The runs of true flags, as (first index, index after the last)."""
    out: list[tuple[int, int]] = []
    for j, flag in enumerate(flags):
        if flag and out and out[-1][1] == j:
            out[-1] = (out[-1][0], j + 1)
        elif flag:
            out.append((j, j + 1))
    return out


def _nan(ys: Sequence[float | None]) -> list[float]:
    return [float("nan") if y is None else y for y in ys]


def plot_watermarks(batches: Sequence[Mapping[str, Any]], path: str | os.PathLike[str],
                    title: str = "") -> dict[str, Any]:
    """Draw the timeline to ``path`` (.png, .svg or .html); return the plotted series.

    ``batches`` are metrics lines (:func:`lowwater.metrics.log.read_checkpoint`) or
    batch records. The returned dict is :func:`series` plus ``drawn``: for each line and
    marker set in the picture, its label and the (x, y) points matplotlib drew.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ConfigurationError("output", f"{path} must end in .png, .svg or .html")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = series(batches)
    fig, (ax, bars) = plt.subplots(2, 1, figsize=(11, 7), dpi=110, sharex=True,
                                   gridspec_kw={"height_ratios": [3, 1]})
    x = data["x"]
    styles = ["-", "--", "-.", ":"]
    marker = "o" if len(x) <= MARKED_BATCHES else None
    for i, (p, ys) in enumerate(data["partitions"].items()):
        line = ax.step(x, _nan(ys), where="post", lw=1.6, alpha=0.9, linestyle=styles[i % len(styles)],
                       marker=marker, markersize=3, zorder=3, label=f"partition {p}")[0]
        for k, (j, end) in enumerate(_runs(data["idle"][p])):  # one span per run of idle batches
            right = x[end] if end < len(x) else x[-1] + max(0.5, (x[-1] - x[0]) / max(1, len(x) - 1))
            ax.axvspan(x[j], right, color=line.get_color(), alpha=0.12, zorder=0,
                       label=f"partition {p} idle" if k == 0 else None)
    ax.step(x, _nan(data["combined"]), where="post", lw=7, color="black", alpha=0.25, zorder=2,
            label=COMBINED_LABEL)
    late = [(t, w, n) for t, w, n in data["late"] if w is not None]
    if late:
        ax.scatter([t for t, _, _ in late], [w for _, w, _ in late], marker="x", s=70, color="crimson", zorder=5,
                   label="late elements (count), at the watermark they were judged against")
        for t, w, n in (late if len(late) <= MARKED_BATCHES else ()):  # thousands of labels: minutes, unreadable
            ax.annotate(str(n), (t, w), textcoords="offset points", xytext=(5, -11), fontsize=8, color="crimson")
    if data["end_of_input"] is not None:
        ax.axvline(data["end_of_input"], color="gray", linestyle=":", lw=1.2,
                   label="end of input: MAX watermark fires every remaining window")
    origin = data["origin_ms"]
    ax.set_ylabel("event time (s after " + (f"{fmt_time(origin)})" if abs(origin) >= EPOCH_LIKE_MS
                                            else f"{origin} ms)"))
    ax.set_title(title or "lowwater watermarks per micro-batch")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)

    width = 0.8 * min((b - a for a, b in itertools.pairwise(x) if b > a), default=1.0) / 3
    bx = [t for t, _ in data["fired"]]
    drawn_bars = [
        bars.bar([t - width for t in x], data["rows_in"], width=width, color="steelblue", alpha=0.7,
                 label="rows in"),
        bars.bar(x, data["rows_late"], width=width, color="crimson", alpha=0.8, label="late rows"),
        bars.bar([t + width for t in bx], [n for _, n in data["fired"]], width=width, color="seagreen", alpha=0.8,
                 label="windows fired"),
    ]
    if len(x) <= 40:
        for b in drawn_bars:
            bars.bar_label(b, labels=[str(int(v)) if v else "" for v in b.datavalues], fontsize=7, padding=1)
    top = max([1, *data["rows_in"], *data["rows_late"], *(n for _, n in data["fired"])])
    if top > 50 * max([1, *data["rows_late"], *(n for _, n in data["fired"])]):
        bars.set_yscale("symlog", linthresh=1)
        bars.set_ylim(0, top * 40)  # room for the labels and the legend
    else:
        bars.set_ylim(0, top * 1.6)
    bars.set_ylabel("per batch")
    start = data["start_ms"]
    bars.set_xlabel("processing time (s since the first batch" +
                    (f", {fmt_time(start)})" if start is not None and abs(start) >= EPOCH_LIKE_MS else ")"))
    bars.grid(alpha=0.3, axis="y")
    bars.legend(loc="upper center", fontsize=8, ncol=3, framealpha=0.9)
    fig.tight_layout()
    data["drawn"] = _drawn(ax)
    if suffix == ".html":
        buf = io.StringIO()
        fig.savefig(buf, format="svg")
        Path(path).write_text(_html(title or "lowwater watermarks", buf.getvalue(), batches))
    else:
        fig.savefig(path)
    plt.close(fig)
    return data


def _drawn(ax: Any) -> dict[str, list[tuple[float, float]]]:
    """Label -> the points of every labelled line and marker set on the axes."""
    out: dict[str, list[tuple[float, float]]] = {}
    for line in ax.get_lines():
        label = line.get_label()
        if not label.startswith("_") and len(line.get_xdata()) > 0:
            out[label] = [(float(a), float(b)) for a, b in zip(line.get_xdata(), line.get_ydata(), strict=True)]
    for coll in ax.collections:
        label = coll.get_label()
        if not label.startswith("_") and len(coll.get_offsets()) > 0:
            out[label] = [(float(a), float(b)) for a, b in coll.get_offsets()]
    return out


def _html(title: str, svg: str, batches: Sequence[Mapping[str, Any]]) -> str:
    from lowwater.observe.status import BATCH_HEADER, batch_row

    svg = svg[svg.index("<svg"):]
    rows = "\n".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in batch_row(b)) + "</tr>"
                     for b in _as_lines(batches))
    head = "".join(f"<th>{html.escape(h)}</th>" for h in BATCH_HEADER)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse;font-size:13px}}
td,th{{border-bottom:1px solid #ddd;padding:2px 10px;text-align:right}} svg{{max-width:100%;height:auto}}</style>
</head><body><h1>{html.escape(title)}</h1>
{svg}
<h2>Batches</h2><table><tr>{head}</tr>
{rows}
</table></body></html>
"""
