"""Print a benchmark result JSON as a Markdown table: ``python benchmarks/table.py results/<file>.json``."""

from __future__ import annotations

import json
import sys


def table(result: dict) -> str:
    lines = [
        "| keys | partitions | rows/batch | Spark rows/s | lowwater rows/s | ratio | Spark median ms | "
        "lowwater median ms | ratio (CPU) | load 1m |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in result.get("grid", []):
        s, w = c["spark"], c["lowwater"]
        load = "–".join(f"{x:.1f}" for x in (min(c["load_average_1m"]), max(c["load_average_1m"])))
        lines.append(
            f"| {c['keys']:,} | {c['partitions']} | {c['rows_per_batch']:,} | {s['rows_per_s']:,} | "
            f"{w['rows_per_s']:,} | **{c['ratio']:.2f}** | {s['median_batch_ms']:,.0f} | {w['median_batch_ms']:,.0f} | "
            f"{c.get('ratio_cpu', float('nan')):.2f} | {load} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(table(json.load(f)))
