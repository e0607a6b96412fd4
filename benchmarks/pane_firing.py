"""A sliding firing from panes in three shapes, on a static input: what the lambda over the window
range costs per row against a join of (pane, window) pairs (``NativeProcessor._fires``, session 61).

    .venv/bin/python benchmarks/pane_firing.py
    .venv/bin/python benchmarks/pane_firing.py --keys 1000 --rounds 5

Writes ``--rows`` partials (``--keys`` keys over 12 panes of 5 s: windows of 1 minute sliding by
25 s) as Parquet to ``/tmp/lowwater-pane-firing/``, then counts, ``--rounds`` times in one
``local[2]`` session, the merge of the windows in a range over them:

* ``lambda``: each pane's windows from ``NativeProcessor._windows_sql`` (the range's bounds as
  literals inside a lambda, evaluated per row without generated code);
* ``literal``: the same expression with the bounds in the generated code (what a batch must not
  do: new code each batch), a lower bound;
* ``join``: the pairs joined in as a ``VALUES`` table (the firing of many partials).

Prints each shape's wall time per round; the first rounds include the JIT's.
"""

from __future__ import annotations

import argparse
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--rows", type=int, default=1_500_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    from lowwater.spark.session import get_or_create_session

    spark = get_or_create_session(master="local[2]", conf={"spark.ui.enabled": "false"})
    size, slide, g, lo, hi = 60_000, 25_000, 5_000, 99_999, 125_000
    path = "/tmp/lowwater-pane-firing"
    spark.range(args.rows).selectExpr(f"concat('k', CAST(id % {args.keys} AS STRING)) AS key",
                                      f"CAST(60000 + {g} * (id % 12) AS BIGINT) AS start", "id AS acc",
                                      "CAST(1 AS BIGINT) AS n").write.mode("overwrite").parquet(path)
    spark.read.parquet(path).createOrReplaceTempView("parts")
    first_window = f"p + {g - size} + pmod(0 - (p + {g - size}), {slide})"
    above_lo = f"CAST('{lo}' AS BIGINT) + 1 + pmod(0 - CAST('{lo}' AS BIGINT) - 1, {slide})"
    first, last = f"greatest({first_window}, {above_lo})", f"least(p - pmod(p, {slide}), CAST('{hi}' AS BIGINT))"
    body = (f"CASE WHEN {first} <= {last} THEN sequence({first}, {last}, CAST({slide} AS BIGINT)) "
            "ELSE CAST(array() AS ARRAY<BIGINT>) END")
    windows = {"lambda": f"flatten(transform(array(start), p -> {body}))",
               "literal": body.replace("(p ", "(start ").replace("p +", "start +").replace("p -", "start -")
               .replace("(p,", "(start,")}
    pairs = [(p, ws) for ws in range(lo + 1 + (-lo - 1) % slide, hi + 1, slide) for p in range(ws, ws + size, g)]
    table = ", ".join(f"(CAST('{p}' AS BIGINT), CAST('{w}' AS BIGINT))" for p, w in pairs)
    queries = {name: f"SELECT key, w, sum(acc), sum(n) FROM (SELECT *, explode({w}) AS w FROM parts) GROUP BY key, w"
               for name, w in windows.items()}
    queries["join"] = (f"SELECT key, w, sum(acc), sum(n) FROM parts JOIN (VALUES {table}) AS t(pp, w) ON start = pp "
                       "GROUP BY key, w")
    counts = set()
    for r in range(args.rounds):
        for name, q in queries.items():
            t = time.monotonic()
            counts.add(spark.sql(q).count())
            print(f"round {r + 1}: {name:8} {1000 * (time.monotonic() - t):7.0f} ms", flush=True)
    assert len(counts) == 1, f"the shapes disagree: {counts}"
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
