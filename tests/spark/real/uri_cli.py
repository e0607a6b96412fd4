"""The CLI on a pipeline whose checkpoint is a Hadoop URI (``hdfs:``, ``s3a:``), as a user on a
cluster drives it: shared by test_hdfs.py and test_s3.py."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

PIPELINE = """
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows
from lowwater.spark.sinks.delta import DeltaSink
from lowwater.spark.sinks.files import DirectorySink
from lowwater.spark.sources import PartitionedLogSource

RUNTIME_OPTIONS = {{"clock": lambda b: 1_000 * b}}

def build(env):
    source = PartitionedLogSource({log!r}, [("user", "STRING"), ("ts", "BIGINT"), ("n", "BIGINT")],
                                  max_files_per_trigger=1)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    (env.from_source(source, strategy).key_by("user").window(TumblingEventTimeWindows.of(10_000)).sum("n"){sink})
"""
"""A pipeline file over the log :func:`write_log` writes: 10 s tumbling windows per user, summed,
to ``sink`` (a method call, ``.print()``; the file imports ``DirectorySink`` and ``DeltaSink``)."""


def write_log(log: Path) -> None:
    """12 records per partition, users ``u`` (1 each) and ``v`` (2 each): 24 rows, 4 windows."""
    from lowwater.io import PartitionedLogWriter

    writer = PartitionedLogWriter(log, "jsonl")
    writer.append(0, [{"user": "u", "ts": 1_000 * i, "n": 1} for i in range(12)])
    writer.append(1, [{"user": "v", "ts": 1_000 * i + 500, "n": 2} for i in range(12)])


def run_status_and_plot(tmp_path: Path, ck: str, sink: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``lowwater run`` twice on checkpoint ``ck`` (the second resumes there and ends the input),
    then ``status`` and ``plot``; checks what each prints and returns ``run``'s first output. Run
    prints each batch's line (a URI checkpoint has no metrics.jsonl to tail); ``status`` and
    ``plot`` read the batch records through the URI."""
    from lowwater.cli import main

    write_log(tmp_path / "log")
    pipeline = tmp_path / "p.py"
    pipeline.write_text(textwrap.dedent(PIPELINE.format(log=str(tmp_path / "log"), sink=sink)))
    assert main(["run", str(pipeline), "--checkpoint", ck]) == 0
    printed = capsys.readouterr().out
    batches = [x for x in printed.splitlines() if re.match(r"\s+\d+\*?\s", x)]
    assert batches and f"{len(batches)} batches on the native path" in printed
    assert main(["run", str(pipeline), "--checkpoint", ck, "--end-of-input"]) == 0
    assert f"{ck} holds {len(batches)} batches: resuming from them if they are this pipeline's" in \
        capsys.readouterr().out
    assert main(["status", ck]) == 0
    status = capsys.readouterr().out
    assert "24 rows in = 24 windowed + 0 late + 0 dead-lettered (balanced)" in status
    assert "end of input reached" in status
    assert main(["plot", ck, "-o", str(tmp_path / "w.png")]) == 0
    assert (tmp_path / "w.png").stat().st_size > 0
    return printed
