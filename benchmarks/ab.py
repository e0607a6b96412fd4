"""Alternating runs of code versions (or settings) on one log: is a change faster, beyond the noise?

    .venv/bin/python benchmarks/ab.py --keys 1000 --batches 8 --rounds 3 \\
        '{"before": {"src": "/tmp/old/src"}, "after": {}, "spark": {"engine": "spark"}}'

Each variant is one engine's run in a fresh Python process (``scale.py --child``, the same run
as a ``scale.py`` cell) on ONE log ``scale.py`` would write (``--partitions``, default 4, ``--rows`` rows per
batch): ``engine`` is ``lowwater`` (default) or ``spark`` (Spark's own query), ``src`` the
directory put first on the child's ``PYTHONPATH`` (another checkout's ``src``; default this
one's) and ``conf`` Spark settings for the child's session (``LOWWATER_BENCH_CONF``). The
variants run in turn, the order reversed every other round, so a machine that gets slower or
faster during the runs weighs on each alike.

Prints each run's median batch time (batches after the first) and every batch's time, then per
variant the median of its runs' medians and of their means (batches after the first); writes
``benchmarks/results/ab-<UTC timestamp>.json``.
A diagnostic for one change at a time; the issue's matrix is ``scale.py``'s.

``LOWWATER_BENCH_SOURCE=files`` makes every variant read the log's Parquet segments with Spark's own
file source and ``from_json`` (all in the JVM, as a Kafka stream is read) instead of the partitioned
log's Python data source (``harness.files_stream``); it is recorded in the results file, as are
``LOWWATER_BENCH_SLIDE_MS``, which makes both engines' windows slide by it, and ``LOWWATER_BENCH_WINDOW_MS``,
the windows' size (default 1 minute).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", help='JSON: {"name": {"engine": "lowwater"|"spark", "src": DIR, "conf": {...}}, ...}')
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=None, help="the log's partitions (default scale.py's, 4)")
    args = ap.parse_args(argv)
    variants: dict[str, dict[str, Any]] = json.loads(args.variants)
    unknown = {k for v in variants.values() for k in v} - {"engine", "src", "conf"}
    if not variants or unknown:
        ap.error(f"variants: a JSON object of variants with engine, src and conf only (got {sorted(unknown)})")
    for name, v in variants.items():
        if v.get("engine", "lowwater") not in ("lowwater", "spark"):
            ap.error(f"variant {name}: engine is lowwater or spark, not {v['engine']!r}")
        if v.get("src") and not (Path(v["src"]) / "lowwater").is_dir():
            ap.error(f"variant {name}: {v['src']} holds no lowwater package (give a checkout's src directory)")

    import harness as H
    import scale

    partitions = args.partitions or scale.PARTITIONS
    work = Path(tempfile.mkdtemp(prefix="lowwater-ab-"))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    try:
        H.write_log(work / "log", H.stream_for(partitions, args.keys, args.rows, scale.SPAN_MS, scale.BOUND_MS),
                    args.batches, args.rows)
        for r in range(args.rounds):
            for name in (list(variants) if r % 2 == 0 else list(reversed(variants))):
                v = variants[name]
                env = dict(os.environ, LOWWATER_BENCH_CONF=json.dumps(v.get("conf", {})))
                if v.get("src"):
                    env["PYTHONPATH"] = os.pathsep.join([str(Path(v["src"]).resolve()), env.get("PYTHONPATH", "")])
                ckpt = work / f"ck-{name}-{r}"
                argv_ = [v.get("engine", "lowwater"), str(work / "log"), str(ckpt), str(partitions), "hdfs"]
                run = H.run_child(str(HERE / "scale.py"), argv_, f"ab {name}: round {r + 1}", env=env)
                shutil.rmtree(ckpt, ignore_errors=True)
                runs[name].append(run)
                print(f"{name:>12} round {r + 1}: median {run['median_batch_ms']:,.0f} ms, "
                      f"CPU {run.get('median_batch_cpu_ms') or 0:,.0f} ms; batches {run['batch_ms']}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # the mean as well: where some batches fire windows and others do not (sliding windows), the
    # median batch is one kind of batch, and the mean is the run's throughput
    summary = {name: {"median_of_medians_ms": statistics.median(x["median_batch_ms"] for x in rs),
                      "median_of_cpu_medians_ms": statistics.median(x.get("median_batch_cpu_ms") or 0 for x in rs),
                      "median_of_means_ms": statistics.median(x["mean_batch_ms"] for x in rs)}
               for name, rs in runs.items()}
    for name, s in summary.items():
        print(f"{name:>12}: median of medians {s['median_of_medians_ms']:,.0f} ms, "
              f"CPU {s['median_of_cpu_medians_ms']:,.0f} ms; median of means {s['median_of_means_ms']:,.0f} ms")
    doc = {"benchmark": "ab", "utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "config": {"keys": args.keys, "rows_per_batch": args.rows, "batches": args.batches, "rounds": args.rounds,
                      "partitions": partitions, "master": "local[2]", "cpus": os.cpu_count(),
                      "source": H.bench_source(), "slide_ms": H.bench_slide_ms(),
                      "window_ms": H.bench_window_ms(60_000)},
           "variants": variants, "summary": summary, "runs": runs}
    out = HERE / "results" / f"ab-{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    out.write_text(json.dumps(doc, indent=1))
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
