"""The engine's checkpoint store (``lowwater.spark.state.StateStore``) on a local directory, without
Spark: what it reads to answer the questions the engine asks at every batch."""

from __future__ import annotations

from pathlib import Path

from lowwater.spark.fs import LocalFS
from lowwater.spark.state import StateStore


class CountingFS(LocalFS):
    """The local file system, counting the files read."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    def read(self, path: str) -> bytes | None:
        self.reads.append(path)
        return super().read(path)


def test_the_end_of_input_is_looked_up_without_reading_every_batch_record_each_time(tmp_path: Path) -> None:
    """The engine asks for the end-of-input marker at every batch. Without one (a job still reading
    its input) the store read every batch record each time, for the end a checkpoint from before
    the marker would record there: up to 1,000 files a batch, two requests each on S3."""
    store = StateStore(tmp_path / "ck")
    for b in range(50):
        store.write_batch_record(b, {"batch_id": b, "end_of_input": False, "metrics": {}})
    store.fs = counting = CountingFS()
    for _ in range(10):
        assert store.end_of_input() is None
    assert len([p for p in counting.reads if "/batches/" in p]) == 50  # once, not 500
    assert len([p for p in counting.reads if p.endswith("end_of_input.json")]) == 10
    store.write_end_of_input({"step": 50, "done": False})
    assert store.end_of_input() == {"step": 50, "done": False}


def test_a_checkpoint_from_before_the_marker_has_its_end_of_input_in_its_batch_records(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "ck")
    store.write_batch_record(0, {"batch_id": 0, "end_of_input": False, "metrics": {}})
    store.write_batch_record(1, {"batch_id": 1, "end_of_input": True})  # interrupted: no metrics
    assert store.end_of_input() == {"step": 1, "done": False}
    got = store.end_of_input()
    assert got == {"step": 1, "done": False}
    got["done"] = True  # a caller's copy
    assert StateStore(tmp_path / "ck").end_of_input() == {"step": 1, "done": False}
    assert store.end_of_input() == {"step": 1, "done": False}


def test_a_path_changed_by_the_pipeline_is_refused_without_a_hint_that_cannot_work(tmp_path: Path) -> None:
    """A field assigner edited to a function moves a pipeline from the native path to the executor
    path; the refusal said to pass ``path='native'``, which gave the same refusal and hint (a user
    probe, session 56). The hint is for a general-path checkpoint of a pipeline the keyed path now
    takes, where ``path='general'`` resumes it."""
    import pytest

    from lowwater.core.errors import ConfigurationError

    def refusal(recorded: str, now: str) -> str:
        store = StateStore(tmp_path / f"ck-{recorded}-{now}")
        store.claim({"path": recorded, "000": "SourceTransformation"})
        store.commit_json(0, {})
        with pytest.raises(ConfigurationError) as refused:
            store.claim({"path": now, "000": "SourceTransformation"})
        return str(refused.value)

    said = refusal("native", "executor")
    assert "path was 'native', now 'executor'" in said and "pass path=" not in said, said
    assert "pass path='general' to SparkRuntime" in refusal("general", "keyed")


def test_a_damaged_control_file_is_refused_naming_it_and_what_to_do(tmp_path: Path) -> None:
    """A state file or the pipeline's record cut in half (a torn copy or restore): the restart failed
    with json's own ``Unterminated string starting at: line 1 column 630``, naming no file (a user
    probe, session 59)."""
    import pytest

    from lowwater.spark.sealed import CheckpointIntegrityError

    store = StateStore(tmp_path / "ck")
    store.claim({"path": "native", "000": "SourceTransformation"})
    store.commit_json(0, {"format": 2, "clock_ms": 7000, "open_starts": {"10000": [0]}})
    for damaged, read in ((tmp_path / "ck" / "lowwater" / "state" / "0.json", lambda: store.load_json(0)),
                          (tmp_path / "ck" / "lowwater" / "pipeline.json",
                           lambda: store.claim({"path": "native", "000": "SourceTransformation"}))):
        text = damaged.read_bytes()
        damaged.write_bytes(text[:len(text) // 2])
        with pytest.raises(CheckpointIntegrityError) as refused:
            read()
        said = str(refused.value)
        assert f"{damaged} is damaged: it is not the JSON lowwater wrote" in said, said
        assert "start over with a new checkpoint location" in said, said
        damaged.write_bytes(text)
