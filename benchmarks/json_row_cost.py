"""What the keyed path's stage B spends per output row to write it as JSON (``json_rows.json_row``),
with and without the field order it reports (session 33), in one process, alternating.

    .venv/bin/python benchmarks/json_row_cost.py [--rows 200000] [--rounds 9]

Prints the median CPU seconds per ``--rows`` rows of each variant and their ratio. The rows are
dicts of five fields, as a process window function yields them (one in two with a null).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from lowwater.spark.json_rows import json_row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    docs = [{"user": f"u{i % 1000}", "minute": i // 60, "total": i, "mean": i / 3, "biggest": None if i % 2 else i}
            for i in range(args.rows)]
    times: dict[str, list[float]] = {"without order": [], "with order": []}
    for _ in range(args.rounds):
        for variant in times:
            shapes: set[str] = set()
            order: dict[str, None] | None = {} if variant == "with order" else None
            start = time.process_time()
            for d in docs:
                json_row(d, shapes, order)
            times[variant].append(time.process_time() - start)
    medians: dict[str, Any] = {k: statistics.median(v) for k, v in times.items()}
    for variant, m in medians.items():
        print(f"{variant:>14}: median {m:.3f} CPU s per {args.rows:,} rows ({m / args.rows * 1e6:.2f} µs a row)")
    print(f"with ÷ without: {medians['with order'] / medians['without order']:.3f}")


if __name__ == "__main__":
    main()
