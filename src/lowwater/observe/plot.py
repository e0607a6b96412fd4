"""The watermark timeline as a picture.

Each partition's watermark and the combined watermark (their minimum over non-idle
partitions) against processing time, idle stretches shaded, late elements as marks on
the combined watermark they were judged against, and window firings as ticks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP

__all__ = ["plot_watermarks", "series"]


def series(batches: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The plotted data: x = processing time (s since the first batch), y = event time (s)."""
    rows = [b for b in batches if not b.get("end_of_input") and "metrics" in b]
    if not rows:
        return {"x": [], "partitions": {}, "combined": [], "late": [], "fired": [], "idle": {}, "origin_ms": 0}
    t0 = rows[0]["clock_ms"]
    x = [(b["clock_ms"] - t0) / 1000 for b in rows]
    marks = [w for b in rows
             for w in (b["metrics"]["combined_watermark"], *b["metrics"]["partition_watermarks"].values())]
    finite = [w for w in marks if w not in (MIN_TIMESTAMP, MAX_TIMESTAMP)]
    origin = (min(finite) // 1000) * 1000 if finite else 0

    def ev(ms: int | None) -> float | None:
        return None if ms is None or ms in (MIN_TIMESTAMP, MAX_TIMESTAMP) else (ms - origin) / 1000

    parts = sorted({p for b in rows for p in b["metrics"]["partition_watermarks"]}, key=lambda s: (len(s), s))
    return {
        "x": x,
        "origin_ms": origin,
        "partitions": {p: [ev(b["metrics"]["partition_watermarks"].get(p)) for b in rows] for p in parts},
        "idle": {p: [p in b["metrics"].get("idle_partitions", []) for b in rows] for p in parts},
        "combined": [ev(b["metrics"]["combined_watermark"]) for b in rows],
        # late elements of batch k were judged against the watermark after batch k-1
        "late": [(xi, ev(rows[i - 1]["metrics"]["combined_watermark"]) if i else None, b["metrics"]["rows_late"])
                 for i, (xi, b) in enumerate(zip(x, rows, strict=True)) if b["metrics"].get("rows_late")],
        "fired": [(xi, b["metrics"]["windows_fired"]) for xi, b in zip(x, rows, strict=True)
                  if b["metrics"].get("windows_fired")],
    }


def plot_watermarks(batches: Sequence[dict[str, Any]], path: str | os.PathLike[str], title: str = "") -> dict[str, Any]:
    """Draw the timeline to ``path`` (.png or .svg); returns the plotted series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = series(batches)
    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=110)
    x = data["x"]
    styles = ["-", "--", "-.", ":"]
    for i, (p, ys) in enumerate(data["partitions"].items()):
        line = ax.step(x, [float("nan") if y is None else y for y in ys], where="post", lw=1.6, alpha=0.85,
                       linestyle=styles[i % len(styles)], zorder=2, label=f"partition {p}")[0]
        idle = data["idle"][p]
        for i, is_idle in enumerate(idle):
            if is_idle:
                right = x[i + 1] if i + 1 < len(x) else x[i] + 0.5
                ax.axvspan(x[i], right, color=line.get_color(), alpha=0.10,
                           label=f"partition {p} idle" if i == idle.index(True) else None)
    ax.step(x, [float("nan") if y is None else y for y in data["combined"]], where="post", lw=6, color="black",
            alpha=0.3, zorder=1, label="combined (min over non-idle)")
    lx = [t for t, w, _ in data["late"] if w is not None]
    ly = [w for _, w, _ in data["late"] if w is not None]
    if lx:
        ax.scatter(lx, ly, marker="x", s=60, color="crimson", zorder=5,
                   label="late elements (count, at the watermark they were judged against)")
        for (t, w, n) in data["late"]:
            if w is not None:
                ax.annotate(str(n), (t, w), textcoords="offset points", xytext=(4, 4), fontsize=7, color="crimson")
    if data["fired"]:
        ymin = ax.get_ylim()[0]
        ax.scatter([t for t, _ in data["fired"]], [ymin] * len(data["fired"]), marker="|", s=200,
                   color="seagreen", label="windows fired")
    ax.set_xlabel("processing time (s since the first batch)")
    ax.set_ylabel(f"event time (s after {data['origin_ms']} ms)")
    ax.set_title(title or "lowwater watermarks")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return data
