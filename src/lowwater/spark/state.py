"""State versioned by micro-batch id under the checkpoint: the basis of exactly-once.

Layout under ``<checkpoint>/lowwater/`` (a local directory or any Hadoop URI, :mod:`.fs`)::

    pipeline.json            the pipeline this checkpoint belongs to
    batches/<id>.json        what batch <id> depended on besides its input (the clock),
                             written before its state; then its metrics
    state/<id>.json          native paths: the control-plane state after batch <id> (JSON,
                             :mod:`.native_state`), with the batch's counters; window contents
                             are Parquet under windows/ (:mod:`.window_store`)
    state/<id>.snap          general path: a full snapshot of the engine state after batch <id>
    state/<id>.delta         general path: what batch <id> changed (touched windows, dropped windows)
                             (both sealed, :mod:`.sealed`: they hold user objects, so they are
                             refused unless their HMAC under the state key matches)

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
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lowwater.core.errors import ConfigurationError
from lowwater.graph.pipeline import (
    FIELD_TYPES_KEY,
    SOURCE_ORDER_KEY,
    STRATEGY_SETTINGS_KEY,
    UNRECORDED_BEFORE,
    WALK_ORDER_KEY,
)
from lowwater.spark.fs import CheckpointFS, LocalFS, checkpoint_fs, is_uri, join
from lowwater.spark.sealed import CheckpointIntegrityError, StateKey, seal, state_key, unseal

__all__ = ["KEEP_BATCH_RECORDS", "KEEP_JSON_VERSIONS", "StateStore", "checkpoint_lines"]

KEEP_JSON_VERSIONS = 10
"""How many versions of the native paths' JSON state are kept before the newest one."""

KEEP_BATCH_RECORDS = 1000
"""How many of the newest ``batches/<id>.json`` records the engine keeps (Spark keeps 100
batches of its own offsets and commits)."""


_UNREAD = object()


class StateStore:
    def __init__(self, checkpoint: str | os.PathLike[str], snapshot_every: int = 20, keep_snapshots: int = 2,
                 spark: Any = None) -> None:
        self.location = join(str(checkpoint), "lowwater")
        self.root = Path(checkpoint) / "lowwater"
        """The local directory (plain paths); with a URI checkpoint, :attr:`location` is the truth."""
        self.fs: CheckpointFS = checkpoint_fs(str(checkpoint), spark)
        self.local = not is_uri(str(checkpoint))
        if self.fs.is_file(str(checkpoint)):
            raise ConfigurationError("checkpoint_location", f"{checkpoint} is a file, not a directory; hint: give "
                                     "a directory (a new one starts the job over; the job's own resumes it)")
        self.batches = join(self.location, "batches")
        self.state = join(self.location, "state")
        self.fs.mkdirs(self.batches)
        self.fs.mkdirs(self.state)
        self.snapshot_every = snapshot_every
        self.keep_snapshots = keep_snapshots
        self._spark = spark
        self._key: StateKey | None = None
        self._bound: dict[str, Any] = {}
        """What :meth:`bind_sources` bound this run's sources to, by source index: each batch's check."""
        self._legacy_end: Any = _UNREAD
        """An end of input that records written before the marker existed say, read once: the engine
        asks at every batch (:meth:`end_of_input`), and reading every batch record each time cost
        up to :data:`KEEP_BATCH_RECORDS` reads a batch, two requests each on S3. Only a legacy
        checkpoint has such records without the marker: this code writes the marker first."""

    @property
    def key(self) -> StateKey:
        """The key that seals the general path's state files (:mod:`.sealed`), looked up once."""
        if self._key is None:
            self._key = state_key(self._spark)
        return self._key

    def _json(self, path: str) -> Any:
        """The JSON file at ``path`` (None if there is none); one that does not parse (a torn copy or
        restore, a file system repaired after a crash) is refused naming the file, where json's own
        message named neither the file nor the checkpoint (a user probe, session 59)."""
        data = self.fs.read(path)
        if data is None:
            return None
        try:
            return json.loads(data)
        except ValueError as e:  # json.JSONDecodeError, or bytes that are not UTF-8
            raise CheckpointIntegrityError(
                f"{path} is damaged: it is not the JSON lowwater wrote ({e}), so it was cut short or changed "
                "after it was written, and nothing of it was loaded. Restore the checkpoint from a copy, or "
                "start over with a new checkpoint location") from None

    # -- which pipeline this checkpoint belongs to -------------------------------------
    def claim(self, fingerprint: dict[str, Any]) -> None:
        """Record the pipeline on first use; refuse a checkpoint made by a different one.

        A checkpoint is bound once a batch's state is committed: a run that failed before
        that (a wrong field name, a raising function) leaves it free for the fixed pipeline."""
        path = join(self.location, "pipeline.json")
        recorded = self._json(path)
        if recorded is not None:
            # a checkpoint from before the sources' identities (or their fields' types) were
            # recorded: compared without them
            compared = {k: v for k, v in fingerprint.items() if k not in UNRECORDED_BEFORE or k in recorded}
            if isinstance(recorded.get(FIELD_TYPES_KEY), dict) and isinstance(compared.get(FIELD_TYPES_KEY), dict):
                # and each source's types only where recorded (a DataFrameSource's since session 54)
                compared[FIELD_TYPES_KEY] = {s: t for s, t in compared[FIELD_TYPES_KEY].items()
                                             if s in recorded[FIELD_TYPES_KEY]}
            if recorded != compared and self.latest_version() is not None:
                changed = sorted(k for k in set(recorded) | set(compared) if recorded.get(k) != compared.get(k))
                what = _changes(recorded, compared)
                hint = ""
                # a general-path checkpoint from before the keyed path took its pipeline: path="general" resumes
                # it (native and executor follow from the pipeline: no option takes a run from one to the other)
                if "path" in changed and recorded.get("path") == "general" and compared.get("path") == "keyed":
                    hint = (f"; to resume it on the path that wrote it, pass path={recorded['path']!r} to SparkRuntime "
                            f"(\"path\": {json.dumps(recorded['path'])} in RUNTIME_OPTIONS)")
                raise ConfigurationError(
                    "checkpoint_location",
                    f"{self.location.rsplit('/', 1)[0]} belongs to a different pipeline ({what}; a checkpoint is "
                    "bound to its pipeline's sources, operators and sinks, in order). Use a new "
                    "checkpoint location (checkpoint_location=, or --checkpoint on the CLI), or run the "
                    f"pipeline that made this one{hint}",
                )
            if recorded == fingerprint:
                return
        self.fs.write_atomic(path, json.dumps(fingerprint, sort_keys=True, indent=1).encode())

    def bind_sources(self, sources: Sequence[Any]) -> None:
        """Record what each source reads beyond its name and options, its ``read_identity()`` (a Kafka
        topic's id), in ``sources.json``; refuse a resumed checkpoint whose source now reads another
        (the source's ``identity_changed`` says how). Checked once a batch is committed: before
        that, nothing was read from what the checkpoint recorded."""
        now = {str(i): got for i, s in enumerate(sources)
               if callable(getattr(s, "read_identity", None)) and (got := s.read_identity())}
        if not now:
            return
        path = join(self.location, "sources.json")
        recorded: dict[str, Any] = self._json(path) or {}
        if self.latest_version() is not None:
            for i, ids in now.items():
                said = sources[int(i)].identity_changed(recorded[i], ids) if isinstance(recorded.get(i), dict) else None
                if said:
                    raise ConfigurationError("checkpoint_location", f"{self.location.rsplit('/', 1)[0]}: {said}")
        merged = {**recorded, **{i: {**(recorded.get(i) or {}), **ids} for i, ids in now.items()}}
        if merged != recorded:
            self.fs.write_atomic(path, json.dumps(merged, sort_keys=True, indent=1).encode())
        self._bound = {i: merged[i] for i in now}

    def check_sources(self, sources: Sequence[Any]) -> None:
        """Before a batch is processed: refuse it when a source that reads something another can take
        the name of (``checks_identity_each_batch``: a Kafka topic, deleted and made again under its
        name while the job runs) reads another now than :meth:`bind_sources` bound this run to. The
        check at the start alone let a running job read the new topic from the old offsets on, its
        first records skipped without a word (a user probe, session 59)."""
        for i, bound in self._bound.items():
            source = sources[int(i)]
            if not getattr(source, "checks_identity_each_batch", False):
                continue
            said = source.identity_changed(bound, source.read_identity())
            if said:
                raise ConfigurationError("checkpoint_location", f"{self.location.rsplit('/', 1)[0]}, while this "
                                                                f"run read it: {said}")

    def recorded_path(self) -> str | None:
        """The engine path (``native``, ``keyed``, ``general``...) of the pipeline this checkpoint
        is bound to (:meth:`claim`), or None for one that committed no batch yet."""
        recorded = self._json(join(self.location, "pipeline.json"))
        if recorded is None or self.latest_version() is None:
            return None
        path: str | None = recorded.get("path")
        return path

    def job_id(self) -> str | None:
        """The id of the job this checkpoint holds, made with it (``job.json``): a sink that keys its
        exactly-once writes by the job (a ``DeltaSink``'s ``txnAppId``) writes a new checkpoint's
        batches, whose ids start again at 0, as a new job's, where its table had recorded the old
        job's ids and skipped them. None for a checkpoint that ran batches before jobs had ids: its
        sinks keep writing under the ids they wrote under."""
        path = join(self.location, "job.json")
        recorded = self._json(path)
        if recorded is not None:
            job_id: str | None = recorded.get("job_id")
            return job_id
        job = None if self.latest_version() is not None else uuid.uuid4().hex
        self.fs.write_atomic(path, json.dumps({"job_id": job}).encode())
        return job

    # -- the batch log ----------------------------------------------------------------
    def batch_record(self, batch_id: int) -> dict[str, Any] | None:
        record: dict[str, Any] | None = self._json(join(self.batches, f"{batch_id}.json"))
        return record

    def write_batch_record(self, batch_id: int, record: dict[str, Any]) -> None:
        self.fs.write_atomic(join(self.batches, f"{batch_id}.json"), json.dumps(record, sort_keys=True).encode())

    def forget_batch_record(self, batch_id: int) -> None:
        """Delete ``batches/<batch_id>.json``: a batch that old is never replayed (Spark replays
        only the batch it had not committed), and its metrics line stays in ``metrics.jsonl``.
        The engine forgets one record per batch, :data:`KEEP_BATCH_RECORDS` behind, so a job
        that runs for months keeps a bounded number of files."""
        if batch_id >= 0:
            self.fs.delete(join(self.batches, f"{batch_id}.json"))

    # -- end of input -------------------------------------------------------------------
    def end_of_input(self) -> dict[str, Any] | None:
        """The end-of-input marker, ``{"step": E, "done": bool}``, or ``None`` if the input has not ended.

        Step ``E`` is lowwater's own step id of the end-of-input step (its MAX watermark). It is
        recorded before the step runs, and never pruned: every later Spark batch ``b >= E`` runs
        as step ``b + 1``, so the step cannot take the id of a batch that Spark runs later."""
        marker: dict[str, Any] | None = self._json(join(self.location, "end_of_input.json"))
        if marker is not None:
            return marker
        if self._legacy_end is _UNREAD:  # checkpoints before the marker: their records say it
            legacy = [r for r in self.batch_records() if r.get("end_of_input")]
            self._legacy_end = {"step": int(legacy[0]["batch_id"]), "done": "metrics" in legacy[0]} \
                if legacy else None
        return None if self._legacy_end is None else dict(self._legacy_end)

    def write_end_of_input(self, marker: dict[str, Any]) -> None:
        self.fs.write_atomic(join(self.location, "end_of_input.json"), json.dumps(marker, sort_keys=True).encode())

    def batch_records(self) -> list[dict[str, Any]]:
        return _batch_records(self.fs, self.batches)

    # -- versions (native paths: JSON) ----------------------------------------------------
    def _versions(self, suffix: str) -> list[int]:
        end = f".{suffix}"
        return sorted(int(n[: -len(end)]) for n in self.fs.names(self.state)
                      if n.endswith(end) and n[: -len(end)].lstrip("-").isdigit())

    def latest_version(self) -> int | None:
        vs = self._versions("snap") + self._versions("delta") + self._versions("json")
        return max(vs) if vs else None

    def commit_json(self, version: int, data: dict[str, Any]) -> None:
        """Record the control-plane state after batch ``version`` (atomically; the ``state_write`` fault
        point is inside), and delete versions more than :data:`KEEP_JSON_VERSIONS` older.

        Later versions stay: a replay rewrites version ``v`` with the same content, and a later
        one (the end-of-input step after the last batch, which Spark may replay) is still valid.
        The files are O(partitions + open window starts) each, so keeping a few costs little."""
        self.fs.write_atomic(join(self.state, f"{version}.json"), json.dumps(data, sort_keys=True).encode(),
                             fault_batch=version)
        for v in self._versions("json"):
            if v < version - KEEP_JSON_VERSIONS:
                self.fs.delete(join(self.state, f"{v}.json"))

    def amend_json(self, version: int, data: dict[str, Any]) -> None:
        """Rewrite the state after batch ``version`` (atomically) with what the batch learnt after
        :meth:`commit_json`, before it ends: the native path's count of its result rows, known once
        its sinks have written them. Safe for the same reason as a replay's rewrite: no other batch
        has read this version yet (the next one runs only after Spark commits this one), and a crash
        before the amendment makes Spark replay the batch, which commits the version again."""
        self.fs.write_atomic(join(self.state, f"{version}.json"), json.dumps(data, sort_keys=True).encode())

    def load_json(self, version: int) -> dict[str, Any]:
        """The control-plane state after batch ``version``."""
        data: dict[str, Any] | None = self._json(join(self.state, f"{version}.json"))
        if data is None:
            raise FileNotFoundError(
                f"state for batch {version} is missing under {self.state}: the checkpoint is incomplete; "
                "restore it, or start over with a new checkpoint location"
            )
        return data

    # -- versions (general path: snapshots and deltas) ------------------------------------
    def load(self, version: int, empty: Callable[[], Any], apply_delta: Callable[[Any, Any], Any]) -> Any:
        """The state after batch ``version`` (``empty()`` before any batch)."""
        snaps = [v for v in self._versions("snap") if v <= version]
        if snaps:
            base = snaps[-1]
            path = join(self.state, f"{base}.snap")
            state = unseal(self.fs.read(path) or b"", self.key, path)
        else:
            base, state = -1, empty()
        for v in range(base + 1, version + 1):
            data = self.fs.read(join(self.state, f"{v}.delta"))
            if data is None:
                raise FileNotFoundError(
                    f"state for batch {v} is missing under {self.state}: the checkpoint is incomplete; "
                    "restore it, or start over with a new checkpoint location"
                )
            state = apply_delta(state, unseal(data, self.key, join(self.state, f"{v}.delta")))
        return state

    def commit(self, version: int, state: Any, delta: Any) -> None:
        """Record the state after batch ``version`` (a snapshot, or the delta from ``version - 1``)."""
        for stale in (f"{version}.snap", f"{version}.delta"):
            self.fs.delete(join(self.state, stale))
        if version % self.snapshot_every == 0:
            self.fs.write_atomic(join(self.state, f"{version}.snap"), seal(state, self.key), fault_batch=version)
            self._prune(version)
        else:
            self.fs.write_atomic(join(self.state, f"{version}.delta"), seal(delta, self.key), fault_batch=version)
        for later in [v for v in self._versions("snap") + self._versions("delta") if v > version]:
            for name in (f"{later}.snap", f"{later}.delta"):
                self.fs.delete(join(self.state, name))

    def _prune(self, version: int) -> None:
        snaps = [v for v in self._versions("snap") if v <= version]
        if len(snaps) <= self.keep_snapshots:
            return
        oldest_kept = snaps[-self.keep_snapshots]
        for v in self._versions("snap") + self._versions("delta"):
            if v < oldest_kept:
                self.fs.delete(join(self.state, f"{v}.snap"))
                self.fs.delete(join(self.state, f"{v}.delta"))

    def size_bytes(self) -> int:
        """The bytes of state, window and keyed-state files under the checkpoint."""
        return sum(self.fs.size_bytes(d) for d in (self.state, join(self.location, "windows"),
                                                    join(self.location, "keyed")))


def checkpoint_lines(checkpoint: str, spark: Any) -> list[dict[str, Any]]:
    """The metrics lines of a checkpoint on any file system (a Hadoop URI: ``hdfs:``, ``s3a:``...),
    one per batch, from its batch records (the newest :data:`KEEP_BATCH_RECORDS`), read through
    the session's Hadoop configuration, as the job wrote them: what ``lowwater status`` and
    ``lowwater plot`` show of a checkpoint that has no ``metrics.jsonl`` (object stores cannot
    append). Nothing is written."""
    from lowwater.metrics.log import CheckpointError, lines_from_records

    fs = checkpoint_fs(checkpoint, spark)
    location = join(checkpoint, "lowwater")
    if fs.is_file(checkpoint):  # as a local path's (metrics.log.read_checkpoint) and `run`'s say it
        raise CheckpointError(f"{checkpoint} is a file, not a checkpoint directory; hint: pass the directory given as "
                              "the job's checkpoint location")
    if not fs.exists(location):
        what = "nothing" if not fs.exists(checkpoint) else "no lowwater/ directory"
        raise CheckpointError(f"{checkpoint} is not a lowwater checkpoint ({what} there); hint: pass the checkpoint "
                              "location of a lowwater job (`lowwater run --checkpoint URI`, or SparkRuntime(URI))")
    pipeline = fs.read(join(location, "pipeline.json"))
    recorded = json.loads(pipeline) if pipeline is not None else {}
    path = recorded.get("path") if isinstance(recorded, dict) else None
    return lines_from_records(_batch_records(fs, join(location, "batches")), path if isinstance(path, str) else None)


READERS = 16
"""Batch records read at once through Hadoop (:func:`_batch_records`): a request to an object store
takes tens of milliseconds, and a checkpoint keeps up to :data:`KEEP_BATCH_RECORDS` of them."""


def _batch_records(fs: CheckpointFS, batches: str) -> list[dict[str, Any]]:
    """The records in ``batches`` (``<id>.json``), by batch id; one forgotten between the listing
    and its read is left out. Through Hadoop (``hdfs:``, ``s3a:``), :data:`READERS` at a time:
    one by one, ``lowwater status`` on S3 made two requests after another for each of up to
    1,000 records."""
    ids = sorted(int(n[:-5]) for n in fs.names(batches) if n.endswith(".json") and n[:-5].isdigit())
    paths = [join(batches, f"{i}.json") for i in ids]
    if isinstance(fs, LocalFS) or len(paths) < 2:
        got = [fs.read(p) for p in paths]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(READERS, len(paths)), thread_name_prefix="lowwater-records") as pool:
            got = list(pool.map(fs.read, paths))
    return [json.loads(data) for data in got if data is not None]


def _changes(recorded: dict[str, Any], now: dict[str, Any]) -> str:
    """What differs between two fingerprints (:meth:`~lowwater.graph.pipeline.Pipeline.fingerprint`),
    its transformations matched as sequences, so that a sink removed reads as that sink removed, not
    as every transformation after it changed into the next one."""
    from difflib import SequenceMatcher

    def ops(d: dict[str, Any]) -> list[str]:
        return [str(d[k]) for k in sorted(k for k in d if k.isdigit())]

    a, b = ops(recorded), ops(now)
    out: list[str] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        pairs = list(zip(a[i1:i2], b[j1:j2], strict=False))
        out += [f"{x!r} is now {y!r}" for x, y in pairs]
        out += [f"{x!r} removed" for x in a[i1 + len(pairs):i2]]
        out += [f"{y!r} added" for y in b[j1 + len(pairs):j2]]
    for k in sorted(k for k in set(recorded) | set(now) if not k.isdigit() and recorded.get(k) != now.get(k)):
        if k == FIELD_TYPES_KEY:  # the fields whose type changed (a field added or removed is said above)
            was, new = recorded.get(k) or {}, now.get(k) or {}
            out += [f"field {name!r} was {was[i][name]}, now {new[i][name]}" for i in sorted(set(was) & set(new))
                    for name in was[i] if name in new[i] and was[i][name] != new[i][name]]
            continue
        if k == STRATEGY_SETTINGS_KEY:  # the settings that changed, of the strategies both have
            was, new = recorded.get(k) or {}, now.get(k) or {}
            out += [f"the watermark strategy's {name} was {was[i].get(name, 'nothing')}, "
                    f"now {new[i].get(name, 'nothing')}"
                    for i in sorted(set(was) & set(new)) for name in sorted(set(was[i]) | set(new[i]))
                    if was[i].get(name) != new[i].get(name)]
            out += [f"the watermark strategy {i} was {was.get(i)}, now {new.get(i)}"
                    for i in sorted(set(was) ^ set(new))]
            continue
        if k == WALK_ORDER_KEY:  # said where the same transformations are walked in another order
            if sorted(recorded.get(k) or ()) != sorted(now.get(k) or ()):
                continue
            out.append(f"the operators are reached from the sinks in another order (sinks added, or a union's or a "
                       f"connect's inputs given, in another order; the general path keeps each operator's state by "
                       f"that order): {recorded.get(k)!r}, now {now.get(k)!r}")
            continue
        if k == SOURCE_ORDER_KEY:
            out.append(f"the sources are read in another order (a union's or a connect's inputs swapped): "
                       f"{recorded.get(k)!r}, now {now.get(k)!r}")
            continue
        out.append(f"{k} was {recorded.get(k, 'nothing')!r}, now {now.get(k, 'nothing')!r}")
    return "; ".join(out)
