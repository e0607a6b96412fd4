"""Where lowwater's native path spends a micro-batch: wall-clock phases per batch.

    .venv/bin/python benchmarks/profile_native.py [--keys 100000] [--partitions 4] [--rows 1000000] [--batches 6]

Wraps (without changing) the phases of ``NativeProcessor.run`` and the engine's batch driver
(:func:`timed`; ``tests/test_benchmarks.py`` checks that each still exists):

* ``partials``: the batch's Spark job, which parses, assigns windows, aggregates per (key, window)
  and writes the partials to the window store;
* ``fires`` / ``late_fires``: reading the firing starts' partials and aggregating them (and the
  re-firings for allowed lateness), by Spark; ``store_delete``: a start's files past its cleanup;
* ``state_commit``: the driver's JSON state (watermarks, open starts, totals);
* ``sinks``: handing the results, late and dead-letter frames to the sinks; ``batch_record``: the
  batch log and ``state_bytes``;
* ``processor_other``: the rest of ``NativeProcessor.run``; ``foreach_batch``: the whole
  ``foreachBatch`` call; ``trigger``: Spark's whole micro-batch.

Prints JSON: per-phase medians over the steady-state batches (the first is left out).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("PYSPARK_PYTHON", str(Path(sys.executable)))

import harness as H

PHASES: dict[str, float] = defaultdict(float)
PER_BATCH: list[dict[str, float]] = []


@contextlib.contextmanager
def _timed(name: str) -> Iterator[None]:
    t = time.perf_counter()
    try:
        yield
    finally:
        PHASES[name] += time.perf_counter() - t


def _wrap(owner: Any, attr: str, phase: str) -> Callable[[], None]:
    original = getattr(owner, attr)

    def wrapped(*a: Any, **kw: Any) -> Any:
        with _timed(phase):
            return original(*a, **kw)

    setattr(owner, attr, wrapped)
    return lambda: setattr(owner, attr, original)


def timed() -> list[tuple[Any, str, str]]:
    """``(owner, attribute, phase)`` for each function :func:`install` wraps."""
    from lowwater.spark import engine, native, state, window_store

    return [
        (native.NativeProcessor, "_write_partials", "partials"),
        (native.NativeProcessor, "_fires", "fires"),
        (native.NativeProcessor, "_late_fires", "late_fires"),
        (native.NativeProcessor, "run", "processor_run"),
        (window_store.WindowStore, "delete", "store_delete"),
        (state.StateStore, "commit_json", "state_commit"),
        (state.StateStore, "size_bytes", "state_bytes"),
        (state.StateStore, "write_batch_record", "batch_record"),
        (engine, "_deliver", "sinks"),
    ]


def install() -> list[Callable[[], None]]:
    from lowwater.spark import engine

    undo = [_wrap(owner, attr, phase) for owner, attr, phase in timed()]
    original = engine._BatchDriver.on_batch

    def on_batch(self: Any, df: Any, batch_id: int) -> None:
        PHASES.clear()
        t = time.perf_counter()
        original(self, df, batch_id)
        PHASES["foreach_batch"] = time.perf_counter() - t
        PER_BATCH.append({k: round(v * 1000, 1) for k, v in PHASES.items()})

    engine._BatchDriver.on_batch = on_batch
    undo.append(lambda: setattr(engine._BatchDriver, "on_batch", original))
    return undo


def profile(spark: Any, keys: int, partitions: int, rows: int, batches: int, workdir: Path,
            window_ms: int = 10_000, span_ms: int = 10_000, bound_ms: int = 2_000) -> dict[str, Any]:
    PER_BATCH.clear()
    stream = H.stream_for(partitions, keys, rows, span_ms, bound_ms)
    log = workdir / "log"
    H.write_log(log, stream, batches, rows)
    undo = install()
    try:
        _job, _, progress, wall = H.lowwater(spark, log, workdir / "ck", partitions, window_ms, bound_ms)
        times = H.progress_times(progress)
    finally:
        for u in reversed(undo):
            u()
    for pb, t in zip(PER_BATCH, times, strict=False):
        pb["trigger"] = t["ms"]
        inside = ("partials", "fires", "late_fires", "store_delete")
        pb["processor_other"] = round(pb.get("processor_run", 0) - sum(pb.get(k, 0) for k in inside), 1)
        pb["spark_outside_foreach_batch"] = round(t["ms"] - pb["foreach_batch"], 1)
    steady = PER_BATCH[1:] or PER_BATCH
    names = sorted({k for pb in steady for k in pb})
    return {
        "config": {"keys": keys, "partitions": partitions, "rows_per_batch": rows, "batches": batches},
        "median_ms": {k: statistics.median(pb.get(k, 0.0) for pb in steady) for k in names},
        "per_batch_ms": PER_BATCH,
        "wall_s": round(wall, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=6)
    args = ap.parse_args(argv)
    from lowwater.spark.session import get_or_create_session

    spark = get_or_create_session(master="local[2]", app_name="lowwater-profile",
                                  conf={"spark.ui.showConsoleProgress": "false"})
    workdir = Path(tempfile.mkdtemp(prefix="lowwater-profile-"))
    try:
        out = profile(spark, args.keys, args.partitions, args.rows, args.batches, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
