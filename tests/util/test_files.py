"""atomic_write: a reader sees the old file or the new one, never part of one."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

import pytest

from lowwater.core.failures import root_cause
from lowwater.util.files import atomic_write


@pytest.mark.parametrize("unique_tmp", [False, True])
def test_atomic_write_replaces_the_file_and_leaves_no_temporary(tmp_path: Path, unique_tmp: bool) -> None:
    target = tmp_path / "state.json"
    target.write_text("old")
    atomic_write(target, b"new", fsync=True, unique_tmp=unique_tmp)
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_text_is_written_as_utf8(tmp_path: Path) -> None:
    atomic_write(tmp_path / "t", "é\n", fsync=False)
    assert (tmp_path / "t").read_bytes() == "é\n".encode()


def test_a_private_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    atomic_write(tmp_path / "key", b"k", fsync=False, private=True)
    assert stat.S_IMODE(os.stat(tmp_path / "key").st_mode) == 0o600


def test_a_function_writes_the_temporary_at_the_path_it_is_given(tmp_path: Path) -> None:
    atomic_write(tmp_path / "seg", lambda tmp: Path(tmp).write_bytes(b"rows"), fsync=True, unique_tmp=True)
    assert (tmp_path / "seg").read_bytes() == b"rows"


def test_a_failed_write_with_a_unique_temporary_removes_it_and_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "manifest"
    target.write_text("old")

    def fail(tmp: str) -> None:
        Path(tmp).write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, fail, fsync=True, unique_tmp=True)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest"]


def test_a_write_interrupted_before_the_rename_leaves_the_old_file_and_a_named_temporary(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("old")

    def die(f: BinaryIO) -> None:
        f.write(b"ha")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, b"half", fsync=True, before_content=die)
    assert target.read_text() == "old"
    assert (tmp_path / ".state.json.tmp").read_bytes() == b"ha"  # the next write overwrites it


def test_root_cause_searches_an_exception_and_the_exceptions_it_wraps() -> None:
    try:
        try:
            raise ValueError("lowwater.core.errors.UserFunctionError: map 'parse' failed")
        except ValueError as inner:
            raise RuntimeError("[STREAM_FAILED] Query terminated") from inner
    except RuntimeError as e:
        assert root_cause(e) == "UserFunctionError: map 'parse' failed"


def test_root_cause_keeps_a_lowwater_error_quoted_in_a_message_over_the_java_exception_inside_it() -> None:
    """The CLI's line for a sink that failed: the engine's ``the streaming query failed: PipelineError:
    PostgreSQL upsert into t ... failed (batch 0): org.postgresql...`` was cut to the bare
    ``PSQLException``, which names neither the sink nor the table."""
    text = ("the streaming query failed: PipelineError: PostgreSQL upsert into rnopk at jdbc:postgresql://h/db "
            "failed (batch 0): org.postgresql.util.PSQLException: ERROR: there is no unique or exclusion constraint")
    assert root_cause(text) == text[len("the streaming query failed: "):]
    assert root_cause("java.io.IOException: disk full") == "java.io.IOException: disk full"
    assert root_cause("x.MyPipelineError: not ours") == "x.MyPipelineError: not ours", "only lowwater's names"


@pytest.mark.parametrize(("text", "said"), [
    ("Failed to create Python data source instance ... ModuleNotFoundError: No module named 'lowwater'",
     "--py-files does not reach Spark's Python data sources"),
    ("[DATA_SOURCE_NOT_FOUND] Failed to find data source: kafka. Please deploy", "spark-sql-kafka-0-10_2.13:4.2.0"),
    ("java.lang.ClassNotFoundException: Class org.apache.hadoop.fs.s3a.S3AFileSystem not found", "hadoop-aws"),
    ("java.net.ConnectException: Call From vm/127.0.0.1 to localhost:1 failed", "is HDFS running"),
    ("java.net.SocketException: Connection reset; For more details see", "it resumes from its checkpoint"),
    # a user probe's (session 61): a module next to the pipeline file, missing in Spark's Python workers
    ("org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n  File \"/x/worker.py\"\n"
     "ModuleNotFoundError: No module named 'helpers_only_here'", "spark-submit --py-files"),
    # and PYSPARK_PYTHON naming a Python without pyarrow: the worker died before it connected back
    ("org.apache.spark.SparkException: Python worker failed to connect back.\nCaused by: "
     "java.net.SocketTimeoutException: Timed out while waiting for the Python worker to connect back",
     "import pyarrow, pandas, lowwater"),
    # a user probe's (session 65): the keyed path's exact DECIMAL sum past 38 digits, into a DataFrame sink
    ("org.apache.spark.SparkException: [MALFORMED_RECORD_IN_PARSING.WITHOUT_SUGGESTION] Malformed records are "
     "detected in record parsing: [ann,1714521600000,1714521601000,null,0].", "DECIMAL(38,s)"),
])
def test_a_failure_lowwater_knows_by_its_text_gets_a_hint(text: str, said: str) -> None:
    from lowwater.core.failures import hint_for

    hint = hint_for(RuntimeError("[STREAM_FAILED] Query terminated"))
    assert hint is None
    # a module the driver itself lacks is not said to be the workers'
    assert hint_for(ModuleNotFoundError("No module named 'helpers_only_here'")) is None
    try:
        try:
            raise ValueError(text)
        except ValueError as inner:
            raise RuntimeError("[STREAM_FAILED] Query terminated") from inner
    except RuntimeError as e:
        hint = hint_for(e)  # found in the exception it wraps
    assert hint is not None and said in hint, hint
