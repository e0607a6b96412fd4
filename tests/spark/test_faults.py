"""SIGKILLs at seeded random points, restarts, and the sinks (directories and PostgreSQL) equal an uninterrupted run.

The series itself is in ``crash_series.py``; CI runs the seeds in ``CI_SEEDS``.
``LOWWATER_FAULT_RUNS=20`` runs seeds 0..19 instead (``benchmarks/fault_series.py`` runs the full
series and writes its result). The fault points themselves are checked first, without Spark.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lowwater.spark import faults

try:
    from tests.spark.crash_series import PG_POINTS, Series, landed_points, summary
except ImportError:  # tests/spark on sys.path
    from crash_series import PG_POINTS, Series, landed_points, summary  # type: ignore[no-redef]

# A seed of the full series whose kills all name points (so they land whatever the machine's speed):
# 68 kills batch 2 inside the PostgreSQL transaction, batch 5 inside its state write and the
# end-of-input step inside the results directory's write: 3 kills, all inside writes (chosen for
# the log's batches of one segment per partition). Seed 17 (batch 0 inside the results directory's
# write, batch 2 inside the PostgreSQL transaction, batch 5 with the staging table written) ran
# here too until CI's time needed the room; ``LOWWATER_FAULT_RUNS`` runs it.
CI_SEEDS = (68,)


# -- the fault points, without Spark ----------------------------------------------------------------
def test_a_fault_spec_names_batches_and_points() -> None:
    assert faults.parse("") == frozenset()
    assert faults.parse("3:start, 9:pg_uncommitted") == {(3, "start"), (9, "pg_uncommitted")}
    for bad in ("start", "x:start", "3:nowhere", "-1:start", "3"):
        with pytest.raises(ValueError, match="LOWWATER_FAULT"):
            faults.parse(bad)


def _python(code: str, fault: str | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LOWWATER_FAULT"}
    if fault:
        env["LOWWATER_FAULT"] = fault
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_a_fault_kills_only_at_its_batch_and_point(tmp_path: Path) -> None:
    code = "from lowwater.spark import faults\nfaults.at('start', 2)\nfaults.at('after_state', 3)\nprint('survived')"
    assert _python(code, "3:start,2:after_state", tmp_path).stdout.strip() == "survived"
    killed = _python(code, "2:after_state,3:after_state", tmp_path)
    assert killed.returncode == -signal.SIGKILL
    assert "LOWWATER_FAULT: killing the driver at batch 3, after_state" in killed.stderr
    typo = _python(code, "3:after_stat", tmp_path)  # fails the import instead of testing nothing
    assert typo.returncode == 1 and "'3:after_stat' is not <batch_id>:<point>" in typo.stderr



def test_with_two_queries_a_fault_kills_once_both_have_reached_their_points(tmp_path: Path) -> None:
    """LOWWATER_FAULT_QUERIES=2: the first thread to reach a point stops there, the second kills."""
    code = """
        import sys, threading, time
        from lowwater.spark import faults
        first = threading.Thread(target=faults.at, args=("after_state", 3), daemon=True)
        first.start()
        time.sleep(0.5)
        print("alive while one query waits", flush=True)
        faults.at("start", 3)  # not armed: passes
        if len(sys.argv) > 1:
            faults.at("after_state", 3)
        print("survived", flush=True)
    """
    env = {**os.environ, "LOWWATER_FAULT": "3:after_state", "LOWWATER_FAULT_QUERIES": "2"}
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code), "second"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == -signal.SIGKILL, run.stderr
    assert run.stdout.splitlines() == ["alive while one query waits"]
    assert "LOWWATER_FAULT: killing the driver at batch 3, after_state; batch 3, after_state" in run.stderr
    one = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)  # the one waiting query is a daemon thread
    assert one.returncode == 0 and one.stdout.splitlines()[-1] == "survived", one.stderr
    bad = subprocess.run([sys.executable, "-c", "import lowwater.spark.faults"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "LOWWATER_FAULT_QUERIES": "0"})
    assert bad.returncode == 1 and "LOWWATER_FAULT_QUERIES: '0' is not a number of queries" in bad.stderr

STATE = """
    import sys
    from lowwater.spark.state import StateStore
    store = StateStore(sys.argv[1] if len(sys.argv) > 1 else "ck", snapshot_every=2)
    store.commit(0, {"n": 0}, None)
    store.commit(1, None, {"n": 1})      # a delta
    store.commit(2, {"n": 2}, None)      # a snapshot
    store.commit(3, None, {"n": 3})
    print(store.load(3, dict, lambda s, d: {**s, **d}))
"""


def test_a_kill_inside_a_state_write_leaves_the_previous_version_and_a_replay_rewrites_it(tmp_path: Path) -> None:
    for batch, name in ((2, "2.snap"), (3, "3.delta")):
        run = _python(STATE, f"{batch}:state_write", tmp_path)
        assert run.returncode == -signal.SIGKILL, run.stderr
        state = tmp_path / "ck" / "lowwater" / "state"
        half = state / f".{name}.tmp"
        assert half.exists() and half.stat().st_size > 0, "half the bytes should be in the temporary file"
        assert not (state / name).exists(), "the version must not appear before it is complete"
        assert sorted(p.name for p in state.iterdir() if not p.name.startswith(".")) == [
            n for n in ("0.snap", "1.delta", "2.snap") if n != name]
    replay = _python(STATE, None, tmp_path)
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout.strip() == "{'n': 3}"


SINK = """
    from lowwater.spark.sinks import DirectorySink, read_directory
    sink = DirectorySink("out", "jsonl")
    sink.write_batch(0, [{"v": 0}])
    sink.write_batch(1, [{"v": 1}, {"v": 2}])
    print(read_directory("out"))
"""


def test_a_kill_inside_a_directory_write_leaves_no_partial_batch(tmp_path: Path) -> None:
    run = _python(SINK, "1:dir_sink_write", tmp_path)
    assert run.returncode == -signal.SIGKILL
    assert (tmp_path / "out" / ".batch=1.tmp" / "part.jsonl").exists(), "the part file was written"
    assert [d.name for d in (tmp_path / "out").glob("batch=*")] == ["batch=0"]
    replay = _python(SINK, None, tmp_path)
    assert replay.stdout.strip() == "[{'v': 0}, {'v': 1}, {'v': 2}]"
    again = _python(SINK, "1:dir_sink_write", tmp_path)  # killed while replacing a complete batch
    assert again.returncode == -signal.SIGKILL
    assert _python("from lowwater.spark.sinks import read_directory; print(read_directory('out'))", None,
                   tmp_path).stdout.strip() == "[{'v': 0}, {'v': 1}, {'v': 2}]"


# -- the seeded series on Spark and PostgreSQL ------------------------------------------------------
@pytest.mark.spark
def test_seeded_sigkills_then_a_restart_equal_an_uninterrupted_run(spark: Any, pg: Any, tmp_path: Path) -> None:
    count = int(os.environ.get("LOWWATER_FAULT_RUNS") or 0)
    seeds = list(range(count)) if count else list(CI_SEEDS)
    # CI's seeds draw no timed kill: the reference runs in the test session; the full series
    # (LOWWATER_FAULT_RUNS) runs it as a fresh process, whose duration bounds its timed kills
    series = Series(tmp_path, pg, spark=None if count else spark)
    records = [series.run_seed(seed) for seed in seeds]
    failed = [r for r in records if not r["ok"]]
    assert not failed, f"not exactly-once after a restart (logs under {tmp_path / 'logs'}):\n" + json.dumps(
        failed, indent=1)[:20_000]
    totals = summary(records)
    print(json.dumps(totals))
    assert totals["equal"] == len(seeds)
    assert totals["kills_landed"] >= 3 * len(seeds), totals
    if not count:
        points = landed_points(records)
        assert "state_write" in points, totals
        assert points & {"dir_sink_write", *PG_POINTS}, totals
