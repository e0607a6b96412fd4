"""The full fault series: seeded SIGKILLs of the Spark driver, restarts, and exactly-once sinks.

    .venv/bin/python benchmarks/fault_series.py               # seeds 0..19
    .venv/bin/python benchmarks/fault_series.py --seeds 40 --first 100

Not part of CI (CI runs two seeds of it: ``tests/spark/test_faults.py``). It starts a throwaway
PostgreSQL server (``tests/pg_server.py``), then runs :class:`tests.spark.crash_series.Series`:
one uninterrupted run of ``tests/spark/crash_job.py`` (a partitioned log -> tumbling windows with
allowed lateness -> a results directory, a PostgreSQL table and a late directory), then per seed
1-3 kills (a named point inside or between the state and sink writes, in the end-of-input step,
or a SIGKILL of the job's process group after a random delay), one restart without faults, and
the comparison of both directories and the table with the uninterrupted run, plus the metrics
log's accounting (every record counted in; every late record counted late) and no staging table
left behind. See ``tests/spark/crash_series.py`` for the details.

Writes ``benchmarks/results/faults-<UTC timestamp>.json`` (rewritten after every seed, with
``"complete": false`` until the end) and prints one line per seed. Exit 1 if any seed is not ok.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from tests.pg_server import postgres_server  # noqa: E402
from tests.spark.crash_series import Series, summary  # noqa: E402


def _say(msg: str) -> None:
    print(f"[faults {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _git() -> dict[str, Any]:
    """The commit the series runs on, and the source files that differ from it (others may be editing)."""
    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return proc.stdout if proc.returncode == 0 else ""

    dirty = [line[3:] for line in git("status", "--porcelain", "--", "src", "tests").splitlines() if line]
    return {"commit": git("rev-parse", "HEAD").strip(), "modified": dirty}


def _kill_text(k: dict[str, Any]) -> str:
    where = f"{k['delay_s']}s" if k["kind"] == "time" else f"{k['batch']}:{k['point']}"
    return f"{k['kind']}@{where}{'' if k.get('landed') else ' (not landed)'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="how many seeds (default 20)")
    parser.add_argument("--first", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--path", default="native", choices=["native", "executor", "general"])
    parser.add_argument("--workdir", help="keep the runs here (default: a temporary directory, removed if all ok)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) / f"faults-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="lowwater-faults-"))
    seeds = list(range(args.first, args.first + args.seeds))
    started = time.monotonic()
    doc: dict[str, Any] = {
        "started_utc": stamp,
        "command": " ".join([".venv/bin/python", "benchmarks/fault_series.py", *(argv or sys.argv[1:])]),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "path": args.path,
        "git": _git(),
        "seeds": seeds,
        "complete": False,
    }
    records: list[dict[str, Any]] = []
    with postgres_server() as pg:
        series = Series(workdir, pg, path=args.path)
        _say(f"uninterrupted run under {workdir}")
        ref = series.prepare()
        doc["jvm_options"] = series.jvm_options
        doc["reference"] = {"seconds": ref.seconds, "records": series.records, "end_of_input_batch": ref.last_batch,
                            "micro_batches": ref.last_batch, "rows": {k: len(v) for k, v in ref.contents.items()},
                            "batches_with_postgres_rows": sorted(b for b, p in ref.points.items() if "pg_staged" in p)}
        _say(f"reference: {ref.seconds} s, {doc['reference']['rows']}")
        for seed in seeds:
            record = series.run_seed(seed)
            records.append(record)
            _say(f"seed {seed}: {'ok' if record['ok'] else 'NOT OK'} in {record['seconds']} s; "
                 + ", ".join(_kill_text(k) for k in record["kills"]))
            doc.update(runs=records, summary=summary(records), seconds=round(time.monotonic() - started, 1))
            out.write_text(json.dumps(doc, indent=1) + "\n")
    doc.update(complete=True, finished_utc=dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
    out.write_text(json.dumps(doc, indent=1) + "\n")
    totals = doc["summary"]
    print(json.dumps(totals, indent=1))
    _say(f"wrote {out}")
    all_ok = totals["ok"] == len(seeds)
    if all_ok and not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    elif not all_ok:
        _say(f"runs kept under {workdir}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
