"""State versioned by micro-batch id under the checkpoint: the basis of exactly-once.

Layout under ``<checkpoint>/lowwater/``::

    batches/<id>.json        what batch <id> depended on besides its input (the clock),
                             written before its state; then its metrics
    state/<id>.snap          a full snapshot of the engine state after batch <id>
    state/<id>.delta         what batch <id> changed (touched windows, dropped windows)

A full snapshot is written every ``snapshot_every`` batches, a delta otherwise, so the
cost of a batch grows with what it touches, not with the whole state. Loading version
``v`` reads the newest snapshot ``<= v`` and applies the deltas after it. Files are
written to a temporary name and renamed, so a crash leaves either the old or the new
file. Replaying batch ``v`` (Spark re-runs a batch it had not committed) loads ``v - 1``
and rewrites ``v`` with identical contents.
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lowwater.spark import faults

__all__ = ["KEEP_BATCH_RECORDS", "StateStore"]

KEEP_BATCH_RECORDS = 1000
"""How many of the newest ``batches/<id>.json`` records the engine keeps (Spark keeps 100
batches of its own offsets and commits)."""


def _atomic_write(path: Path, data: bytes, batch_id: int | None = None) -> None:
    """Write ``data`` to a temporary file, then rename it to ``path``.

    With ``batch_id``, a ``state_write`` fault for that batch (:mod:`lowwater.spark.faults`)
    kills the process after half of the bytes are in the temporary file."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        if batch_id is not None and faults.armed("state_write", batch_id):
            f.write(data[: len(data) // 2])
            f.flush()
            os.fsync(f.fileno())
            faults.at("state_write", batch_id)
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _dumps(obj: Any) -> bytes:
    """cloudpickle: state may hold user functions (lambdas) inside operators."""
    from pyspark import cloudpickle

    return bytes(cloudpickle.dumps(obj, protocol=5))  # type: ignore[no-untyped-call]


class StateStore:
    def __init__(self, checkpoint: str | os.PathLike[str], snapshot_every: int = 20, keep_snapshots: int = 2) -> None:
        self.root = Path(checkpoint) / "lowwater"
        self.batches = self.root / "batches"
        self.state = self.root / "state"
        self.batches.mkdir(parents=True, exist_ok=True)
        self.state.mkdir(parents=True, exist_ok=True)
        self.snapshot_every = snapshot_every
        self.keep_snapshots = keep_snapshots

    # -- which pipeline this checkpoint belongs to -------------------------------------
    def claim(self, fingerprint: dict[str, Any]) -> None:
        """Record the pipeline on first use; refuse a checkpoint made by a different one.

        A checkpoint is bound once a batch's state is committed: a run that failed before
        that (a wrong field name, a raising function) leaves it free for the fixed pipeline."""
        from lowwater.core.errors import ConfigurationError

        path = self.root / "pipeline.json"
        if path.exists():
            recorded = json.loads(path.read_text())
            if recorded != fingerprint and self.latest_version() is not None:
                changed = sorted(k for k in set(recorded) | set(fingerprint) if recorded.get(k) != fingerprint.get(k))
                what = "; ".join(f"was {recorded.get(k, 'nothing')!r}, now {fingerprint.get(k, 'nothing')!r}"
                                 for k in changed)
                raise ConfigurationError(
                    "checkpoint_location",
                    f"{self.root.parent} belongs to a different pipeline ({what}). Use a new "
                    "checkpoint location (checkpoint_location=, or --checkpoint on the CLI), or run the "
                    "pipeline that made this one",
                )
            if recorded == fingerprint:
                return
        _atomic_write(path, json.dumps(fingerprint, sort_keys=True, indent=1).encode())

    # -- the batch log ----------------------------------------------------------------
    def batch_record(self, batch_id: int) -> dict[str, Any] | None:
        p = self.batches / f"{batch_id}.json"
        return json.loads(p.read_text()) if p.exists() else None

    def write_batch_record(self, batch_id: int, record: dict[str, Any]) -> None:
        _atomic_write(self.batches / f"{batch_id}.json", json.dumps(record, sort_keys=True).encode())

    def forget_batch_record(self, batch_id: int) -> None:
        """Delete ``batches/<batch_id>.json``: a batch that old is never replayed (Spark replays
        only the batch it had not committed), and its metrics line stays in ``metrics.jsonl``.
        The engine forgets one record per batch, :data:`KEEP_BATCH_RECORDS` behind, so a job
        that runs for months keeps a bounded number of files."""
        if batch_id >= 0:
            (self.batches / f"{batch_id}.json").unlink(missing_ok=True)

    # -- end of input -------------------------------------------------------------------
    def end_of_input(self) -> dict[str, Any] | None:
        """The end-of-input marker, ``{"step": E, "done": bool}``, or ``None`` if the input has not ended.

        Step ``E`` is lowwater's own step id of the end-of-input step (its MAX watermark). It is
        recorded before the step runs, and never pruned: every later Spark batch ``b >= E`` runs
        as step ``b + 1``, so the step cannot take the id of a batch that Spark runs later."""
        path = self.root / "end_of_input.json"
        if path.exists():
            marker: dict[str, Any] = json.loads(path.read_text())
            return marker
        legacy = [r for r in self.batch_records() if r.get("end_of_input")]  # checkpoints before the marker
        if legacy:
            return {"step": int(legacy[0]["batch_id"]), "done": "metrics" in legacy[0]}
        return None

    def write_end_of_input(self, marker: dict[str, Any]) -> None:
        _atomic_write(self.root / "end_of_input.json", json.dumps(marker, sort_keys=True).encode())

    def batch_records(self) -> list[dict[str, Any]]:
        ids = sorted(int(p.stem) for p in self.batches.glob("*.json"))
        return [r for r in (self.batch_record(i) for i in ids) if r is not None]

    # -- versions ---------------------------------------------------------------------
    def _versions(self, suffix: str) -> list[int]:
        return sorted(int(p.stem) for p in self.state.glob(f"*.{suffix}"))

    def latest_version(self) -> int | None:
        vs = self._versions("snap") + self._versions("delta")
        return max(vs) if vs else None

    def load(self, version: int, empty: Callable[[], Any], apply_delta: Callable[[Any, Any], None]) -> Any:
        """The state after batch ``version`` (``empty()`` before any batch)."""
        snaps = [v for v in self._versions("snap") if v <= version]
        if snaps:
            base = snaps[-1]
            state = pickle.loads((self.state / f"{base}.snap").read_bytes())
        else:
            base, state = -1, empty()
        for v in range(base + 1, version + 1):
            p = self.state / f"{v}.delta"
            if not p.exists():
                raise FileNotFoundError(
                    f"state for batch {v} is missing under {self.state}: the checkpoint is incomplete; "
                    "restore it, or start over with a new checkpoint location"
                )
            apply_delta(state, pickle.loads(p.read_bytes()))
        return state

    def commit(self, version: int, state: Any, delta: Any) -> None:
        """Record the state after batch ``version`` (a snapshot, or the delta from ``version - 1``)."""
        for stale in (self.state / f"{version}.snap", self.state / f"{version}.delta"):
            stale.unlink(missing_ok=True)
        if version % self.snapshot_every == 0:
            _atomic_write(self.state / f"{version}.snap", _dumps(state), batch_id=version)
            self._prune(version)
        else:
            _atomic_write(self.state / f"{version}.delta", _dumps(delta), batch_id=version)
        for later in [v for v in self._versions("snap") + self._versions("delta") if v > version]:
            for p in (self.state / f"{later}.snap", self.state / f"{later}.delta"):
                p.unlink(missing_ok=True)

    def _prune(self, version: int) -> None:
        snaps = [v for v in self._versions("snap") if v <= version]
        if len(snaps) <= self.keep_snapshots:
            return
        oldest_kept = snaps[-self.keep_snapshots]
        for v in self._versions("snap") + self._versions("delta"):
            if v < oldest_kept:
                (self.state / f"{v}.snap").unlink(missing_ok=True)
                (self.state / f"{v}.delta").unlink(missing_ok=True)

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.state.iterdir() if p.is_file())
