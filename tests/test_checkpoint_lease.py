"""One run at a time on a checkpoint (``lowwater.spark.lease``), on real files and real processes.

A probe (session 48) started a second ``lowwater run`` on a checkpoint in use: Spark re-ran the
batch the first run had not committed beside it, and lowwater's state, sinks and metrics line
for it were written again before Spark failed the second run. The run on Spark is tested in
``tests/spark/test_cli_spark.py``; here, the lease's decisions, in milliseconds."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from lowwater.core.errors import ConfigurationError, PipelineError
from lowwater.spark import lease as lease_module
from lowwater.spark.fs import LocalFS
from lowwater.spark.lease import CheckpointLease, Holder, alive, decide, process_start

HOST = socket.gethostname()


def _lease(tmp_path: Path) -> CheckpointLease:
    (tmp_path / "lowwater").mkdir(exist_ok=True)
    return CheckpointLease(LocalFS(), str(tmp_path / "lowwater"), str(tmp_path))


def _write(tmp_path: Path, holder: Holder) -> None:
    (tmp_path / "lowwater").mkdir(exist_ok=True)
    (tmp_path / "lowwater" / "lease.json").write_text(json.dumps(asdict(holder)))


def _holder_of(proc: subprocess.Popen[bytes], host: str = HOST) -> Holder:
    return Holder("other", host, proc.pid, process_start(proc.pid), 0)


def _recorded(tmp_path: Path) -> dict[str, object] | None:
    path = tmp_path / "lowwater" / "lease.json"
    return json.loads(path.read_text()) if path.exists() else None


def test_the_decisions() -> None:
    me, other = "here", "there"
    held = Holder("r", me, 10, None, 0)
    assert decide(None, me, 1, lambda h: True, lambda: False) == "take"
    assert decide(held, me, 1, lambda h: True, lambda: False) == "refuse"
    assert decide(held, me, 1, lambda h: False, lambda: False) == "take"
    assert decide(replace(held, host=other), me, 1, lambda h: False, lambda: False) == "watch"
    assert decide(held, me, 10, lambda h: True, lambda: True) == "refuse"  # a query of this process holds it
    assert decide(held, me, 10, lambda h: True, lambda: False) == "take"  # this process's, left behind


def test_a_lease_whose_process_runs_on_this_host_is_refused_naming_it(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _write(tmp_path, _holder_of(proc))
        with pytest.raises(ConfigurationError, match=re.escape(f"is in use by run other (host {HOST}, pid {proc.pid}")):
            _lease(tmp_path).acquire()
        assert _recorded(tmp_path)["run"] == "other"  # type: ignore[index]
    finally:
        proc.kill()
        proc.wait()


def test_a_lease_left_by_a_process_that_died_is_taken_at_once(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    holder = _holder_of(proc)
    proc.wait()
    _write(tmp_path, holder)
    assert not alive(holder)
    lease = _lease(tmp_path)
    started = time.monotonic()
    lease.acquire()
    assert time.monotonic() - started < 1
    assert _recorded(tmp_path)["run"] == lease.me.run  # type: ignore[index]
    lease.release()
    assert _recorded(tmp_path) is None


def test_a_pid_reused_by_another_process_does_not_hold_the_lease(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        holder = replace(_holder_of(proc), pid_start="1")  # the pid's process started at another time
        assert not alive(holder)
        _write(tmp_path, holder)
        _lease(tmp_path).acquire()
    finally:
        proc.kill()
        proc.wait()


def test_another_hosts_lease_is_taken_once_it_is_not_renewed_and_refused_if_it_is(tmp_path: Path) -> None:
    stale = Holder("far", "elsewhere", 1, None, 0)
    _write(tmp_path, stale)
    lease = _lease(tmp_path)
    started = time.monotonic()
    lease.acquire(watch_s=0.5)
    assert time.monotonic() - started >= 0.5
    assert _recorded(tmp_path)["run"] == lease.me.run  # type: ignore[index]
    lease.release()

    _write(tmp_path, stale)
    renewer = threading.Timer(0.2, lambda: _write(tmp_path, replace(stale, renewals=1)))
    renewer.start()
    with pytest.raises(ConfigurationError, match=r"in use by run far \(host elsewhere.*renewed it while this run"):
        _lease(tmp_path).acquire(watch_s=5)
    renewer.join()


def test_a_second_query_of_one_process_is_refused_and_a_lease_it_left_is_taken(tmp_path: Path) -> None:
    first = _lease(tmp_path)
    first.acquire()
    running = [True]
    first.hold(lambda: running[0])
    with pytest.raises(ConfigurationError, match="a query of this process"):
        _lease(tmp_path).acquire()
    running[0] = False  # the first query ended, its lease not yet released
    second = _lease(tmp_path)
    second.acquire()
    assert _recorded(tmp_path)["run"] == second.me.run  # type: ignore[index]
    first.release()  # too late: the lease is the second's now, and stays
    assert _recorded(tmp_path)["run"] == second.me.run  # type: ignore[index]
    second.release()


def test_a_holder_renews_and_one_whose_lease_was_taken_stops_before_its_next_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lease_module, "RENEW_S", 0.05)
    lease = _lease(tmp_path)
    lease.acquire()
    lease.hold(lambda: True)
    deadline = time.monotonic() + 10
    while (_recorded(tmp_path) or {}).get("renewals", 0) < 2:
        assert time.monotonic() < deadline, "the lease was not renewed"
        time.sleep(0.02)
    lease.check()  # still its own
    _write(tmp_path, Holder("usurper", "elsewhere", 1, None, 0))  # taken while this run was paused
    while lease.lost is None:
        assert time.monotonic() < deadline, "the renewal did not see the lease taken"
        time.sleep(0.02)
    with pytest.raises(PipelineError, match=r"taken over by run usurper \(host elsewhere.*without writing the batch"):
        lease.check()
    lease.release()
    assert _recorded(tmp_path)["run"] == "usurper"  # type: ignore[index]


def test_a_lease_released_when_its_query_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lease_module, "RENEW_S", 0.05)
    lease = _lease(tmp_path)
    lease.acquire()
    running = [True]
    lease.hold(lambda: running[0])
    assert _recorded(tmp_path) is not None
    running[0] = False
    deadline = time.monotonic() + 10
    while _recorded(tmp_path) is not None:
        assert time.monotonic() < deadline, "the lease outlived its query"
        time.sleep(0.02)
    assert os.getpid() == lease.me.pid


def test_a_process_that_exits_holding_a_lease_releases_it(tmp_path: Path) -> None:
    """A run stopped by a SIGTERM to its process group lost Spark's JVM first, its stop failed before
    the release, and the lease stayed behind its exit (CI, session 56)."""
    (tmp_path / "lowwater").mkdir()
    code = ("import sys; from lowwater.spark.fs import LocalFS; from lowwater.spark.lease import CheckpointLease; "
            f"lease = CheckpointLease(LocalFS(), {str(tmp_path / 'lowwater')!r}, {str(tmp_path)!r}); "
            "lease.acquire(); lease.hold(lambda: True); print(open(lease.path).read()); sys.exit(3)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["host"] == HOST  # it held the lease
    assert _recorded(tmp_path) is None
