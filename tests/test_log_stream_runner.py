"""The log source in PySpark's streaming-source runner: the Python process the driver JVM starts to
ask the source for offsets. Here the test is the JVM's side of the runner's protocol (a Unix
socket, as Spark's ``PythonWorkerFactory`` may use), so that the connection can close at a chosen
moment; the runner itself is PySpark's own module, run as Spark runs it."""

from __future__ import annotations

import itertools
import json
import os
import pickle
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from lowwater.spark.log_stream import LogDataSource, hung_up


def _utf8(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack(">i", len(data)) + data


def _runner_after_the_jvm_hangs_up(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Start the runner on the log source, let it set its reader up, then close the connection as
    an interrupted query thread does, and return how the runner ended."""
    short = tempfile.mkdtemp(prefix="lw-")  # a Unix socket's path has at most 107 bytes: not under tmp_path
    path = os.path.join(short, "jvm.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    source = LogDataSource({"root": str(tmp_path / "log"), "fields": json.dumps([["key", "str"]])})
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_WORKER_FACTORY_SECRET"}
    proc = subprocess.Popen([sys.executable, "-m", "pyspark.sql.streaming.python_streaming_source_runner"],
                            env={**env, "PYTHON_WORKER_FACTORY_SOCK_PATH": path},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        server.settimeout(60)
        conn, _ = server.accept()
        with conn:
            conn.settimeout(60)
            f = conn.makefile("rwb")
            (pid,) = struct.unpack(">i", f.read(4))
            assert pid == proc.pid
            command = pickle.dumps(source)
            f.write(_utf8("{}.{}".format(*sys.version_info[:2])) + _utf8(str(tmp_path)) + struct.pack(">i", 0)
                    + struct.pack(">i", len(command)) + command
                    + _utf8(json.dumps({"type": "struct", "fields": []})) + struct.pack(">i", 10_000))
            f.flush()
            assert struct.unpack(">i", f.read(4)) == (0,), "the runner did not set the reader up"
            f.close()
        # the connection is closed: the runner reads no next call, and cannot write back why
        out, err = proc.communicate(timeout=60)
    finally:
        server.close()
        shutil.rmtree(short, ignore_errors=True)
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_the_runner_prints_no_traceback_when_the_jvm_closes_its_connection(tmp_path: Path) -> None:
    """CI, session 47: a Ctrl-C'd run's stderr had the runner's ``EOFError`` and ``BrokenPipeError``
    tracebacks (the query's stop had interrupted a call to the runner, closing its socket)."""
    ended = _runner_after_the_jvm_hangs_up(tmp_path)
    assert ended.returncode != 0  # the runner still fails: only its report of the hang-up is gone
    assert "Traceback" not in ended.stderr, ended.stderr


@pytest.mark.parametrize(("chain", "quiet"), [
    ([EOFError()], True),
    ([EOFError(), BrokenPipeError(32, "Broken pipe")], True),
    ([ConnectionResetError(104, "reset")], True),
    ([ValueError("the reader's own"), BrokenPipeError(32, "Broken pipe")], False),
    ([EOFError(), OSError(5, "I/O error")], False),
    ([KeyboardInterrupt()], False),
])
def test_only_a_chain_of_closed_connections_is_a_hang_up(chain: list[BaseException], quiet: bool) -> None:
    for first, then in itertools.pairwise(chain):
        then.__context__ = first  # raised while handling the one before, as Python chains them
    assert hung_up(chain[-1]) is quiet
    assert hung_up(None) is False
    looped = BrokenPipeError(32, "Broken pipe")
    looped.__context__ = EOFError()
    looped.__context__.__context__ = looped  # set by hand: Python's own chaining makes no loop
    assert hung_up(looped) is True


def test_the_hook_is_not_installed_outside_the_runner() -> None:
    """In the driver (and an executor's worker) errors print as they always did."""
    code = ("import sys; from lowwater.spark.log_stream import LogDataSource; before = sys.excepthook; "
            "LogDataSource({'root': '.', 'fields': '[]'}).streamReader(None); "
            "assert sys.excepthook is before; raise EOFError()")
    ended = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert ended.returncode == 1 and "Traceback" in ended.stderr and "EOFError" in ended.stderr, ended.stderr
