"""Seeded SIGKILL series against ``crash_job.py``: killed and restarted runs must equal an uninterrupted one.

Used by ``tests/spark/test_faults.py`` (a few seeds, in CI) and ``benchmarks/fault_series.py``
(the full series). One series:

1. writes one partitioned log (3 partitions, 3600 records, late and lagging data) and runs the
   job once without faults: the reference. Its output tells which batches have rows for
   PostgreSQL (the ``pg_*`` points exist only there). Given a SparkSession (``spark``, CI's
   tests), the reference runs in it, as ``crash_job.main`` would: it is only the expected
   output, and a fresh driver and JVM of its own cost CI about 45 s. Without one it is a fresh
   process like the killed runs, and its duration bounds the timed kills; a seed that draws a
   timed kill needs that duration, so it fails with a session given.
2. per seed ``s``, ``random.Random(s)`` plans 1-3 kills. Each is a named point
   (``LOWWATER_FAULT=<batch>:<point>``, :mod:`lowwater.spark.faults`) in a micro-batch or in the
   end-of-input step, or a SIGKILL sent by this process to the job's whole process group after a
   uniform delay within the reference's duration. Named kills are applied in batch order (a kill
   in a batch that a restart has already committed could not land); timed kills keep their place.
   Each kill is one run of the job on the seed's checkpoint, sink directory and table.
3. then one run without faults completes, and its sink contents (results and late directories,
   the PostgreSQL table) are compared with the reference's; the metrics log must account for
   every record (sum of ``rows_in`` = records in the log, sum of ``rows_late`` = late rows), and no
   staging table may be left behind.

Every run of the job is a fresh ``python crash_job.py`` (Python driver and its JVM) started in its
own process group. Its JVM runs with ``JVM_OPTIONS`` (C1 only, serial GC): JIT-compiling with C2 on
a shared 2-core machine doubles a run's minute-long wall time, and the JIT has no part in what is
tested.

A kill counts as landed only if the job died of SIGKILL (exit -9), and a named kill only if the
job said it was killing itself at that point. A timed kill may come after the job finished; it is
recorded, not counted.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lowwater.io import PartitionedLogWriter, SyntheticStream
from lowwater.observe.metrics import MetricsLog
from lowwater.spark.faults import POINTS
from lowwater.spark.sinks import read_directory

__all__ = ["IN_WRITE", "PG_POINTS", "Reference", "Run", "Series", "landed_points", "summary", "write_log"]

JOB = Path(__file__).with_name("crash_job.py")
PG_POINTS = ("pg_staged", "pg_uncommitted")
IN_WRITE = ("state_write", "dir_sink_write", "pg_staged", "pg_uncommitted")
RUN_TIMEOUT_S = 900
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def write_log(root: Path) -> int:
    """The crash tests' input (as ``test_engine`` writes it); returns the number of records."""
    writer = PartitionedLogWriter(root, "jsonl")
    stream = SyntheticStream(partitions=3, keys=20, events_per_second=500, disorder_ms=800,
                             lagging_partition=2, lag_ms=3000, late_fraction=0.02, late_by_ms=4000, seed=7)
    stream.write_to(writer, batches=6, rows_per_batch=600)
    return sum(len(p.read_text().splitlines()) for p in root.glob("partition=*/*.jsonl"))


def _psql() -> str:
    try:
        from tests.pg_server import find_pg_bin
    except ImportError:  # run from tests/ on sys.path
        from pg_server import find_pg_bin  # type: ignore[no-redef]
    path = os.path.join(find_pg_bin(), "psql")
    return path if os.access(path, os.X_OK) else "psql"


@dataclass
class Run:
    """One run of the job."""

    exit: int | None
    seconds: float
    log: str
    killed_by_us: bool = False  # a timed kill was sent while the job was still running

    def said(self, text: str) -> bool:
        return text in Path(self.log).read_text(errors="replace")

    def tail(self, lines: int = 25) -> str:
        return "\n".join(Path(self.log).read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Reference:
    seconds: float | None  # None: run in the caller's session, no bound for timed kills
    last_batch: int  # the end-of-input step's batch id
    points: dict[int, list[str]]  # per batch, the points it passes
    contents: dict[str, list[str]]


@dataclass
class Series:
    """Runs the job (``python crash_job.py``) against one PostgreSQL server, under ``workdir``."""

    workdir: Path
    pg: Any  # tests.pg_server.PgServer
    path: str = "native"
    jvm_options: str = JVM_OPTIONS
    spark: Any = None  # a SparkSession: the reference runs in it (see the module's docstring)
    env: dict[str, str] = field(default_factory=dict)  # more environment for each run of the job
    records: int = 0
    reference: Reference | None = None
    log_dir: Path = field(init=False)

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)
        self.log_dir = self.workdir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.input = self.workdir / "log"

    # -- running the job -----------------------------------------------------------------
    def checkpoint(self, name: str) -> str:
        return str(self.workdir / name / "ck")

    def run(self, name: str, label: str, fault: str | None = None, kill_after_s: float | None = None) -> Run:
        """Run the job on checkpoint/output/table ``name``; SIGKILL its process group after ``kill_after_s``."""
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, **self.env}
        env.pop("LOWWATER_FAULT", None)
        if self.jvm_options:
            env["JDK_JAVA_OPTIONS"] = self.jvm_options
        if fault:
            env["LOWWATER_FAULT"] = fault
        argv = [sys.executable, str(JOB), str(self.input), self.checkpoint(name),
                str(self.workdir / name / "out"), self.path,
                "--jdbc-url", self.pg.jdbc_url, "--table", name, "--user", self.pg.user]
        log = self.log_dir / f"{label}.log"
        started = time.monotonic()
        killed = False
        with open(log, "w") as out:
            proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                    cwd=str(self.workdir))
            try:
                try:
                    proc.wait(timeout=kill_after_s if kill_after_s is not None else RUN_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    if kill_after_s is None:
                        raise
                    killed = proc.poll() is None
                    _kill_group(proc.pid)
                    proc.wait(timeout=60)
            finally:
                _kill_group(proc.pid)  # the JVM and Python workers outlive a driver that killed itself
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        return Run(proc.returncode, round(time.monotonic() - started, 2), str(log), killed)

    # -- what a run left behind ----------------------------------------------------------
    def contents(self, name: str) -> dict[str, list[str]]:
        out = self.workdir / name / "out"

        def rows(kind: str) -> list[str]:
            return sorted(json.dumps(r, sort_keys=True) for r in read_directory(out / kind))

        return {"results": rows("results"), "late": rows("late"), "postgres": self.table(name)}

    def psql(self, sql: str) -> list[str]:
        proc = subprocess.run(
            [_psql(), "-X", "-q", "-A", "-t", "-h", self.pg.host, "-p", str(self.pg.port), "-U", self.pg.user,
             "-d", self.pg.database, "-c", sql], capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"psql failed: {proc.stderr.strip()}")
        return [line for line in proc.stdout.splitlines() if line]

    def fresh_table(self, name: str) -> None:
        """Drop the table ``name`` before a new checkpoint writes it: another series in the session (on
        HDFS, on S3) wrote its own there, and a PostgresSink refuses a table another job's rows are in."""
        self.psql(f"DROP TABLE IF EXISTS {name}")

    def table(self, name: str) -> list[str]:
        return self.psql(f"SELECT key, window_start, window_end, value, fire_index FROM {name} ORDER BY 1, 2, 3")

    def staging_tables(self, name: str) -> list[str]:
        return self.psql(f"SELECT tablename FROM pg_tables WHERE tablename ~ '^{name}__stage_[0-9]+$'")

    def _lines(self, name: str) -> list[dict[str, Any]]:
        return MetricsLog(self.workdir / name / "ck").read()

    def accounting(self, name: str, late_rows: int) -> dict[str, Any]:
        """The metrics log against the input: every record counted in, every late record counted late."""
        lines = self._lines(name)
        rows_in = sum(int(m["rows_in"]) for m in lines)
        rows_late = sum(int(m["rows_late"]) for m in lines)
        return {"rows_in": rows_in, "rows_late": rows_late, "batches": len(lines),
                "ok": rows_in == self.records and rows_late == late_rows}

    def batches_done(self, name: str) -> int:
        """Batches whose lowwater metrics are recorded under the checkpoint (finished up to their metrics)."""
        root = self.workdir / name / "ck" / "lowwater" / "batches"
        done = 0
        for p in root.glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                done += "metrics" in json.loads(p.read_text())
        return done

    # -- the series ------------------------------------------------------------------------
    def prepare(self) -> Reference:
        """Write the input and run the job once without faults."""
        if self.reference is not None:
            return self.reference
        self.records = write_log(self.input)
        self.fresh_table("clean")
        if self.spark is not None:
            self.run_here("clean")
            seconds = None
        else:
            run = self.run("clean", "clean")
            if run.exit != 0:
                raise RuntimeError(f"the uninterrupted run failed (exit {run.exit}):\n{run.tail()}")
            seconds = run.seconds
        contents = self.contents("clean")
        assert all(contents.values()), "the job should fire windows and see late rows"
        acc = self.accounting("clean", len(contents["late"]))
        assert acc["ok"], f"the uninterrupted run's metrics do not account for the input: {acc}"
        batches = sorted(int(p.stem) for p in (self.workdir / "clean" / "ck" / "lowwater" / "batches").glob("*.json"))
        last = batches[-1]
        with_rows = {int(d.name.split("=")[1]) for d in (self.workdir / "clean" / "out" / "results").glob("batch=*")
                     if any(f.stat().st_size > 0 for f in d.glob("part*.json*"))}
        points = {b: [p for p in POINTS if p not in PG_POINTS or b in with_rows] for b in batches}
        self.reference = Reference(seconds, last, points, contents)
        return self.reference

    def plan(self, seed: int) -> list[dict[str, Any]]:
        """The kills for ``seed``, in the order they are applied."""
        ref = self.prepare()
        rng = random.Random(seed)
        kills: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.choices(["point", "end_of_input", "time"], weights=[6, 1, 3])[0]
            if kind == "time":
                if ref.seconds is None:
                    raise ValueError(f"seed {seed} draws a timed kill, bounded by the reference's duration as a "
                                     "fresh process: run the series without a SparkSession (spark=None)")
                fraction = rng.random()
                kills.append({"kind": "time", "fraction": round(fraction, 4),
                              "delay_s": round(fraction * ref.seconds, 2)})
            else:
                batch = ref.last_batch if kind == "end_of_input" else rng.randrange(ref.last_batch)
                kills.append({"kind": kind, "batch": batch, "point": rng.choice(ref.points[batch])})
        named = iter(sorted((k for k in kills if k["kind"] != "time"),
                            key=lambda k: (k["batch"], POINTS.index(k["point"]))))
        return [k if k["kind"] == "time" else next(named) for k in kills]

    def run_here(self, name: str) -> None:
        """Run the job on ``name`` in :attr:`spark`, as ``crash_job.main`` runs it in its own process."""
        from lowwater.api import StreamExecutionEnvironment
        from lowwater.spark.engine import SparkRuntime
        from lowwater.spark.sinks import PostgresSink

        try:
            from tests.spark.crash_job import build
        except ImportError:  # run from tests/spark on sys.path
            from crash_job import build  # type: ignore[no-redef]
        env = StreamExecutionEnvironment()
        build(env, str(self.input), str(self.workdir / name / "out"),
              PostgresSink(self.pg.jdbc_url, name, user=self.pg.user))
        SparkRuntime(self.checkpoint(name), spark=self.spark, path=self.path,  # type: ignore[arg-type]
                     clock=lambda b: 1_000 * b, end_of_input=True).execute(env, "crash test")

    def run_seed(self, seed: int) -> dict[str, Any]:
        """Plan, kill, restart, compare: one record of the series."""
        ref = self.prepare()
        name = f"seed{seed}"
        kills = self.plan(seed)
        self.fresh_table(name)
        started = time.monotonic()
        errors: list[str] = []
        for i, kill in enumerate(kills):
            label = f"{name}-kill{i}"
            if kill["kind"] == "time":
                run = self.run(name, label, kill_after_s=kill["delay_s"])
                kill["landed"] = run.killed_by_us and run.exit == -signal.SIGKILL
            else:
                run = self.run(name, label, fault=f"{kill['batch']}:{kill['point']}")
                said = run.said(f"LOWWATER_FAULT: killing the driver at batch {kill['batch']}, {kill['point']}")
                kill["landed"] = run.exit == -signal.SIGKILL and said
            kill.update(exit=run.exit, seconds=run.seconds, batches_done=self.batches_done(name))
            if not kill["landed"] and run.exit != 0:
                errors.append(f"kill {i} ({kill}) ended with exit {run.exit}:\n{run.tail()}")
        final = self.run(name, f"{name}-restart")
        record: dict[str, Any] = {"seed": seed, "kills": kills, "restart_exit": final.exit,
                                  "restart_seconds": final.seconds}
        if final.exit != 0:
            errors.append(f"the restart ended with exit {final.exit}:\n{final.tail()}")
            record.update(equal=False, errors=errors, seconds=round(time.monotonic() - started, 2))
            return record
        got = self.contents(name)
        diff = {k: _diff(ref.contents[k], got[k]) for k in ref.contents if ref.contents[k] != got[k]}
        acc = self.accounting(name, len(got["late"]))
        stages = self.staging_tables(name)
        record.update(
            equal=not diff, sinks={k: len(v) for k, v in got.items()}, differences=diff, accounting=acc,
            staging_tables_left=stages, ok=not diff and acc["ok"] and not stages and not errors, errors=errors,
            seconds=round(time.monotonic() - started, 2),
        )
        return record


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _diff(want: list[str], got: list[str]) -> dict[str, Any]:
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    return {"expected": len(want), "got": len(got), "missing": missing[:10], "extra": extra[:10],
            "duplicates": len(got) - len(set(got))}



@dataclass
class UriSeries(Series):
    """The series with the whole checkpoint, Spark's and lowwater's, under ``base_uri`` (``hdfs://``,
    ``s3a://``), the rest as in :class:`Series`. The checks that read the checkpoint read lowwater's
    batch records through the URI with the session's Hadoop configuration: a URI checkpoint has no
    appendable ``metrics.jsonl``, and its lines are rebuilt from the records, as
    ``SparkJob.metrics()`` does. The uninterrupted reference run stays on the local disk."""

    base_uri: str = ""

    def checkpoint(self, name: str) -> str:
        if name == "clean":  # prepare() reads the reference's checkpoint as files
            return str(self.workdir / name / "ck")
        return f"{self.base_uri}/crash/{name}/ck"

    def _lines(self, name: str) -> list[dict[str, Any]]:
        from lowwater.observe.metrics import lines_from_records
        from lowwater.spark.state import StateStore

        if name == "clean":
            return super()._lines(name)
        return lines_from_records(list(StateStore(self.checkpoint(name), spark=self.spark).batch_records()))

    def batches_done(self, name: str) -> int:
        return len(self._lines(name))


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over a series: kills planned and landed (by kind and point), runs equal and fully ok."""
    kills = [k for r in records for k in r["kills"]]
    landed = [k for k in kills if k.get("landed")]
    by_point: dict[str, int] = {}
    for k in landed:
        key = "time" if k["kind"] == "time" else ("end_of_input:" if k["kind"] == "end_of_input" else "") + k["point"]
        by_point[key] = by_point.get(key, 0) + 1
    return {
        "runs": len(records),
        "equal": sum(bool(r.get("equal")) for r in records),
        "ok": sum(bool(r.get("ok")) for r in records),
        "kills_planned": len(kills),
        "kills_landed": len(landed),
        "timed_kills_planned": sum(k["kind"] == "time" for k in kills),
        "timed_kills_landed": sum(k["kind"] == "time" for k in landed),
        "landed_by_point": dict(sorted(by_point.items())),
    }


def landed_points(records: list[dict[str, Any]]) -> set[str]:
    return {k["point"] for r in records for k in r["kills"] if k.get("landed") and k["kind"] != "time"}

