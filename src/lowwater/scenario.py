"""Scenario transcripts (examples/scenarios/FORMAT.md): parse one, build its pipeline, run it.

The pipeline is built with the public API, exactly as a user would write it, so a
scenario exercises the same code on every runtime.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lowwater.api import CollectionSource, KeyedCoProcessFunction, OutputTag, StreamExecutionEnvironment
from lowwater.core.clock import ManualClock
from lowwater.core.errors import ConfigurationError, LowwaterError
from lowwater.core.time import MIN_TIMESTAMP
from lowwater.core.watermarks import (
    AscendingTimestampExtractor,
    BoundedOutOfOrdernessTimestampExtractor,
    WatermarkStrategy,
    monotony_violation_handler,
)
from lowwater.core.windows import (
    BUILTIN_AGGREGATES,
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WindowAssigner,
    builtin_aggregate,
)

__all__ = ["RecordingCoProcess", "Scenario", "ScenarioError", "SourceSpec", "load_scenario", "run_scenario"]


class ScenarioError(ConfigurationError):
    """A malformed scenario file; the message names the field."""


def _need(d: dict[str, Any], name: str, types: type | tuple[type, ...], where: str) -> Any:
    if name not in d:
        raise ScenarioError(f"{where}{name}", "is required")
    v = d[name]
    if isinstance(v, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise ScenarioError(f"{where}{name}", f"must be {_tname(types)}, got {v!r}")
    if not isinstance(v, types):
        raise ScenarioError(f"{where}{name}", f"must be {_tname(types)}, got {type(v).__name__}")
    return v


def _opt(d: dict[str, Any], name: str, types: type | tuple[type, ...], where: str, default: Any) -> Any:
    return _need(d, name, types, where) if name in d and d[name] is not None else default


def _tname(types: type | tuple[type, ...]) -> str:
    ts = types if isinstance(types, tuple) else (types,)
    return " or ".join(t.__name__ for t in ts)


@dataclass(frozen=True)
class SourceSpec:
    """One source of a several-source scenario."""

    name: str
    partitions: int
    watermark: dict[str, Any]


@dataclass(frozen=True)
class Scenario:
    batches: list[list[dict[str, Any]]]
    per_event: bool
    partitions: int
    processing_times_ms: list[int] | None
    watermark: dict[str, Any]
    window: dict[str, Any]
    allowed_lateness_ms: int
    aggregate: str
    final_watermark: bool
    sources: tuple[SourceSpec, ...] = ()
    """Several sources (examples/scenarios/FORMAT.md "Several sources"); empty for one source."""
    topology: str = "union"
    timer_delay_ms: int = 0

    def source_batches(self, name: str) -> tuple[list[list[dict[str, Any]]], list[list[int]]]:
        """One source's events per batch, and each event's position in its batch."""
        batches, arrival = [], []
        for b in self.batches:
            mine = [(i, e) for i, e in enumerate(b) if e["source"] == name]
            batches.append([e for _, e in mine])
            arrival.append([i for i, _ in mine])
        return batches, arrival


def _event(e: Any, where: str, value_required: bool = True) -> dict[str, Any]:
    if not isinstance(e, dict):
        raise ScenarioError(where, f"an event must be an object, got {type(e).__name__}")
    _need(e, "key", (str, int), f"{where}.")
    _need(e, "ts", int, f"{where}.")
    if value_required or e.get("value") is not None:
        _need(e, "value", (int, float), f"{where}.")
    p = _opt(e, "partition", int, f"{where}.", 0)
    return {**e, "partition": p}


def _watermark(wm: Any, where: str) -> dict[str, Any]:
    if not isinstance(wm, dict):
        raise ScenarioError(where.rstrip("."), f"must be dict, got {type(wm).__name__}")
    kind = _need(wm, "kind", str, where)
    if kind in ("bounded_out_of_orderness", "legacy_bounded"):
        _need(wm, "max_out_of_orderness_ms", int, where)
    elif kind == "time_lag":
        _need(wm, "lag_ms", int, where)
    elif kind == "punctuated":
        _need(wm, "field", str, where)
    elif kind == "legacy_ascending":
        monotony_violation_handler(_opt(wm, "violation_handler", str, where, "log"))
    elif kind != "monotonous":
        raise ScenarioError(
            f"{where}kind",
            f"unknown kind {kind!r}; use bounded_out_of_orderness, monotonous, legacy_bounded, "
            "legacy_ascending, punctuated or time_lag",
        )
    _opt(wm, "idleness_ms", int, where, None)
    return wm


def _sources(data: dict[str, Any]) -> tuple[SourceSpec, ...]:
    raw = _need(data, "sources", list, "")
    if not raw:
        raise ScenarioError("sources", "must name at least one source")
    for name in ("partitions", "watermark"):
        if name in data:
            raise ScenarioError(name, "is not allowed with sources; give it per source")
    specs, seen = [], set()
    for i, src in enumerate(raw):
        where = f"sources[{i}]."
        if not isinstance(src, dict):
            raise ScenarioError(f"sources[{i}]", f"must be an object, got {type(src).__name__}")
        name = _need(src, "name", str, where)
        if name in seen:
            raise ScenarioError(f"{where}name", f"{name!r} is used twice; source names must be unique")
        seen.add(name)
        n = _opt(src, "partitions", int, where, 1)
        if n <= 0:
            raise ScenarioError(f"{where}partitions", f"must be > 0, got {n}")
        specs.append(SourceSpec(name, n, _watermark(_need(src, "watermark", dict, where), f"{where}watermark.")))
    return tuple(specs)


def load_scenario(data: dict[str, Any] | str | Path) -> Scenario:
    """Validate a scenario (a dict, or a JSON file path)."""
    if not isinstance(data, dict):
        path = Path(data)
        if path.is_dir():
            raise ScenarioError(str(path), "is a directory; pass a scenario JSON file")
        if not path.exists():
            raise ScenarioError(str(path), "no such file; pass a scenario JSON file")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ScenarioError(str(path), f"is not valid JSON: {err}") from None
        if not isinstance(data, dict):
            raise ScenarioError(str(path), "must hold a JSON object")
    several = "sources" in data and data["sources"] is not None
    sources = _sources(data) if several else ()
    topology = _opt(data, "topology", str, "", "union")
    if topology not in ("union", "connect"):
        raise ScenarioError("topology", f"unknown topology {topology!r}; use union or connect")
    if not several and "topology" in data:
        raise ScenarioError("topology", "is only allowed with sources")
    connect = several and topology == "connect"
    partitions = _opt(data, "partitions", int, "", 1)
    if partitions <= 0:
        raise ScenarioError("partitions", f"must be > 0, got {partitions}")
    if "batches" in data and data["batches"] is not None:
        raw = _need(data, "batches", list, "")
        batches = []
        for i, b in enumerate(raw):
            if not isinstance(b, list):
                raise ScenarioError(f"batches[{i}]", "must be a list of events")
            batches.append([_event(e, f"batches[{i}][{j}]", not connect) for j, e in enumerate(b)])
        per_event = False
    else:
        events = _need(data, "events", list, "")
        batches = [[_event(e, f"events[{i}]", not connect)] for i, e in enumerate(events)]
        per_event = True
    by_name = {src.name: src for src in sources}
    for i, b in enumerate(batches):
        for j, ev in enumerate(b):
            where = f"events[{i}]" if per_event else f"batches[{i}][{j}]"
            n = partitions
            if several:
                name = _need(ev, "source", str, f"{where}.")
                if name not in by_name:
                    raise ScenarioError(f"{where}.source", f"unknown source {name!r}; use one of {sorted(by_name)}")
                n = by_name[name].partitions
            if not 0 <= ev["partition"] < n:
                field = f"{where}.partition" if several else "partition"
                raise ScenarioError(field, f"event partition {ev['partition']} is outside 0..{n - 1}")
    pts = None
    if data.get("processing_time_ms") is not None:
        pts = _need(data, "processing_time_ms", list, "")
        if per_event:
            raise ScenarioError("processing_time_ms", "is only allowed with batches")
        if len(pts) != len(batches) or not all(isinstance(t, int) and not isinstance(t, bool) for t in pts):
            raise ScenarioError("processing_time_ms", f"must hold one integer per batch ({len(batches)})")
    final = _opt(data, "final_watermark", bool, "", True)
    if connect:
        if len(sources) != 2:
            raise ScenarioError("sources", f"connect needs exactly two sources, got {len(sources)}")
        for name in ("window", "allowed_lateness_ms", "aggregate"):
            if name in data:
                raise ScenarioError(name, "is not allowed with topology connect")
        delay = _opt(data, "timer_delay_ms", int, "", 0)
        return Scenario(batches, per_event, 1, pts, {}, {}, 0, "", final, sources, "connect", delay)
    if "timer_delay_ms" in data:
        raise ScenarioError("timer_delay_ms", "is only allowed with topology connect")
    wm = {} if several else _watermark(_need(data, "watermark", dict, ""), "watermark.")
    win = _need(data, "window", dict, "")
    wkind = _need(win, "kind", str, "window.")
    if wkind == "tumbling":
        _need(win, "size_ms", int, "window.")
    elif wkind == "sliding":
        _need(win, "size_ms", int, "window.")
        _need(win, "slide_ms", int, "window.")
    elif wkind == "session":
        _need(win, "gap_ms", int, "window.")
    else:
        raise ScenarioError("window.kind", f"unknown kind {wkind!r}; use tumbling, sliding or session")
    _opt(win, "offset_ms", int, "window.", 0)
    aggregate = _need(data, "aggregate", str, "")
    if aggregate not in BUILTIN_AGGREGATES:
        raise ScenarioError("aggregate", f"unknown aggregate {aggregate!r}; use one of {sorted(BUILTIN_AGGREGATES)}")
    lateness = _opt(data, "allowed_lateness_ms", int, "", 0)
    if lateness < 0:
        raise ScenarioError("allowed_lateness_ms", f"must be >= 0, got {lateness}")
    return Scenario(batches, per_event, partitions, pts, wm, win, lateness, aggregate, final, sources, topology)


def window_assigner(win: dict[str, Any]) -> WindowAssigner[Any]:
    kind, offset = win["kind"], win.get("offset_ms") or 0
    try:
        if kind == "tumbling":
            return TumblingEventTimeWindows.of(win["size_ms"], offset)
        if kind == "sliding":
            return SlidingEventTimeWindows.of(win["size_ms"], win["slide_ms"], offset)
        return EventTimeSessionWindows.with_gap(win["gap_ms"])
    except ConfigurationError as e:
        raise ScenarioError(_field("window", win, e.parameter), str(e).split(": ", 1)[-1]) from None


def _field(section: str, d: dict[str, Any], parameter: str) -> str:
    """The scenario field behind an API parameter (``size`` -> ``window.size_ms``)."""
    name = f"{parameter}_ms" if f"{parameter}_ms" in d else parameter
    return f"{section}.{name}"


def _ts(e: dict[str, Any]) -> int:
    return int(e["ts"])


def watermark_strategy(wm: dict[str, Any], where: str = "watermark") -> WatermarkStrategy[Any]:
    """The strategy a scenario's ``watermark`` object describes (``where`` names it in errors)."""
    kind = wm["kind"]
    try:
        strategy: WatermarkStrategy[Any]
        if kind == "bounded_out_of_orderness":
            strategy = WatermarkStrategy.for_bounded_out_of_orderness(wm["max_out_of_orderness_ms"])
        elif kind == "monotonous":
            strategy = WatermarkStrategy.for_monotonous_timestamps()
        elif kind == "time_lag":
            strategy = WatermarkStrategy.for_time_lag(wm["lag_ms"])
        elif kind == "punctuated":
            field = wm["field"]
            strategy = WatermarkStrategy.for_punctuated(lambda e, ts: ts if e.get(field) is True else None)
        elif kind == "legacy_bounded":
            strategy = WatermarkStrategy.for_legacy(
                BoundedOutOfOrdernessTimestampExtractor(wm["max_out_of_orderness_ms"], _ts)
            )
        else:
            handler = monotony_violation_handler(wm.get("violation_handler") or "log")
            strategy = WatermarkStrategy.for_legacy(AscendingTimestampExtractor(_ts, handler))
        if kind not in ("legacy_bounded", "legacy_ascending"):
            strategy = strategy.with_timestamp_assigner("ts")
        if wm.get("idleness_ms") is not None:
            strategy = strategy.with_idleness(wm["idleness_ms"])
        return strategy
    except ConfigurationError as e:
        raise ScenarioError(_field(where, wm, e.parameter), str(e).split(": ", 1)[-1]) from None


class RecordingCoProcess(KeyedCoProcessFunction):
    """The ``connect`` scenario's function: records every element with the operator's current
    watermark, registers an event-time timer at ``ts + timer_delay_ms``, and records every
    timer that fires with the watermark that fired it."""

    def __init__(self, timer_delay_ms: int) -> None:
        self.timer_delay_ms = timer_delay_ms

    def _element(self, value: Any, ctx: Any) -> Any:
        ts = ctx.timestamp()
        yield {"kind": "element", "source": value["source"], "key": ctx.get_current_key(), "ts": ts,
               "current_watermark": ctx.timer_service().current_watermark(), "partition": value["partition"]}
        ctx.timer_service().register_event_time_timer(ts + self.timer_delay_ms)

    def process_element1(self, value: Any, ctx: Any, *out: Any) -> Any:
        return self._element(value, ctx)

    def process_element2(self, value: Any, ctx: Any, *out: Any) -> Any:
        return self._element(value, ctx)

    def on_timer(self, timestamp: int, ctx: Any, *out: Any) -> Any:
        yield {"kind": "timer", "timer": timestamp, "key": ctx.get_current_key(),
               "current_watermark": ctx.timer_service().current_watermark()}


def _collection_sources(s: Scenario) -> list[Any]:
    out = []
    for spec in s.sources:
        batches, arrival = s.source_batches(spec.name)
        out.append(CollectionSource(batches, partitions=spec.partitions, partition_of="partition",
                                    processing_times_ms=s.processing_times_ms, arrival=arrival))
    return out


def build_streams(s: Scenario, env: StreamExecutionEnvironment, sources: list[Any] | None = None) -> list[Any]:
    """One stream per source of a several-source scenario, each with its own watermarks."""
    sources = sources if sources is not None else _collection_sources(s)
    return [
        env.from_source(src, watermark_strategy(spec.watermark, f"sources[{i}].watermark"), name=spec.name)
        for i, (spec, src) in enumerate(zip(s.sources, sources, strict=True))
    ]


def build_pipeline(
    s: Scenario, env: StreamExecutionEnvironment, source: Any = None
) -> tuple[Any, Any, OutputTag]:
    """Source -> per-partition watermarks -> key_by(key) -> window -> aggregate, late side output.

    With several sources, ``source`` is their list: ``union`` unites them before ``key_by``;
    ``connect`` keys both by ``key`` into a :class:`RecordingCoProcess` (no side output)."""
    late = OutputTag("late")
    if s.sources:
        streams = build_streams(s, env, source)
        if s.topology == "connect":
            out = streams[0].connect(streams[1]).key_by("key", "key").process(RecordingCoProcess(s.timer_delay_ms))
            return out.collect(), None, late
        stream = streams[0].union(*streams[1:]) if len(streams) > 1 else streams[0]
    else:
        if source is None:
            source = CollectionSource(
                s.batches, partitions=s.partitions, partition_of="partition",
                processing_times_ms=s.processing_times_ms,
            )
        stream = env.from_source(source, watermark_strategy(s.watermark), name="scenario")
    result = (
        stream
        .key_by("key")
        .window(window_assigner(s.window))
        .allowed_lateness(s.allowed_lateness_ms)
        .side_output_late_data(late)
        .aggregate(builtin_aggregate(s.aggregate, "value"))
    )
    return result.collect(), result.get_side_output(late).collect(), late


def run_scenario(
    data: dict[str, Any] | str | Path, runtime: str = "reference", **options: Any
) -> dict[str, Any]:
    """Run a scenario and return its output document (examples/scenarios/FORMAT.md)."""
    s = load_scenario(data)
    if runtime == "spark":
        return _run_on_spark(s, **options)
    if runtime != "reference":
        raise ScenarioError("runtime", f"unknown runtime {runtime!r}; use reference or spark")
    env = StreamExecutionEnvironment()
    results_sink, late_sink, _ = build_pipeline(s, env)
    clock = ManualClock(0) if s.processing_times_ms is not None else None
    from lowwater.runtime.reference import ReferenceRuntime

    runtime_ = ReferenceRuntime(clock=clock, max_batches=None if s.final_watermark else len(s.batches))
    try:
        job = runtime_.execute(env, "scenario")
    except LowwaterError as e:
        # The job failed (e.g. a failing MonotonyViolationHandler): report what it emitted first.
        return _failed_document(runtime_, e)
    doc = _document(s, job, results_sink.results, late_sink.results if late_sink is not None else None)
    multi = [b for n in runtime_.nodes for b in getattr(n, "multi_step_batches", ())]
    if multi:
        doc["multi_step_batch_ends"] = multi
    return doc


def _run_on_spark(s: Scenario, path: str = "auto", spark: Any = None, workdir: str | None = None) -> dict[str, Any]:
    """One Spark micro-batch per scenario batch (per event for ``events``)."""
    import tempfile

    from lowwater.spark.engine import SparkRuntime
    from lowwater.spark.sources import BatchFilesSource

    with tempfile.TemporaryDirectory(prefix="lowwater-scenario-", dir=workdir) as tmp:
        data_dir = Path(tmp) / "input"
        source: Any
        if s.sources:  # one directory per source, one file per batch each (seq: across sources)
            source = []
            for spec in s.sources:
                per_source, arrival = s.source_batches(spec.name)
                _write_batch_files(data_dir / spec.name, per_source, arrival)
                fields = BatchFilesSource.infer_fields([[e for b in s.batches for e in b]])
                source.append(BatchFilesSource(data_dir / spec.name, fields, list(range(spec.partitions)),
                                               s.processing_times_ms))
        else:
            BatchFilesSource.write(data_dir, s.batches)
            source = BatchFilesSource(
                data_dir, BatchFilesSource.infer_fields(s.batches), list(range(s.partitions)), s.processing_times_ms
            )
        env = StreamExecutionEnvironment()
        results_sink, late_sink, _ = build_pipeline(s, env, source)
        pts = s.processing_times_ms
        clock: Any = (lambda b: pts[min(b, len(pts) - 1)]) if pts else None
        runtime = SparkRuntime(
            str(Path(tmp) / "checkpoint"), spark=spark, path=path,  # type: ignore[arg-type]
            clock=clock, end_of_input=s.final_watermark,
        )
        try:
            job = runtime.execute(env, "scenario")
        except LowwaterError as e:
            from lowwater.spark.state import StateStore

            done = [b for b in StateStore(runtime.checkpoint).batch_records() if "metrics" in b]
            if late_sink is None:
                doc = _connect_parts(results_sink.results, _history(done))
            else:
                doc = _document_parts(results_sink.results, late_sink.results, _history(done))
            doc["error"] = {"type": type(e).__name__, "message": str(e)}
            return doc
        batches = job.batches()
        per_batch = [b["metrics"]["combined_watermark"] for b in batches if not b.get("end_of_input")]
        if s.topology == "connect" and s.sources:
            doc = _connect_parts(results_sink.results, _history(batches))
        else:
            doc = _document_parts(results_sink.results, late_sink.results, _history(batches))
        if not s.per_event:
            doc["batch_watermarks"] = per_batch
        doc["spark_path"] = job.path
        return doc


def _write_batch_files(directory: Path, batches: list[list[dict[str, Any]]], arrival: list[list[int]]) -> None:
    """``BatchFilesSource``'s format, with each event's ``seq`` its position in the batch
    across all sources (so the general path interleaves the sources as they arrived)."""
    import os

    directory.mkdir(parents=True, exist_ok=True)
    offsets: dict[int, int] = {}
    for i, (batch, seqs) in enumerate(zip(batches, arrival, strict=True)):
        path = directory / f"batch-{i:08d}.jsonl"
        with open(path, "w") as f:
            for seq, e in zip(seqs, batch, strict=True):
                p = int(e.get("partition", 0) or 0)
                off = offsets.get(p, 0)
                offsets[p] = off + 1
                f.write(json.dumps({"partition": p, "offset": off, "seq": seq, "timestamp": None, "value": e}) + "\n")
        os.utime(path, (1_000_000 + i, 1_000_000 + i))  # Spark orders new files by mtime


def _history(batches: list[dict[str, Any]]) -> list[int]:
    """The combined watermarks forwarded, in order (one combine per batch: at most one each)."""
    history: list[int] = []
    for b in batches:
        w = b["metrics"]["combined_watermark"]
        if (not history and w != MIN_TIMESTAMP) or (history and w > history[-1]):
            history.append(w)
    return history


def _failed_document(runtime: Any, error: LowwaterError) -> dict[str, Any]:
    from lowwater.runtime.nodes import SinkNode, WindowNode

    sinks = [n for n in runtime.nodes if isinstance(n, SinkNode)]
    operator = next(n for n in runtime.nodes if hasattr(n, "watermark_history"))
    emitted = [[*n.sink.results, *(r.value for r in n.records)] for n in sinks]  # type: ignore[attr-defined]
    if isinstance(operator, WindowNode):
        doc = _document_parts(emitted[0], emitted[1], operator.watermark_history)
    else:
        doc = _connect_parts(emitted[0], operator.watermark_history)
    doc["error"] = {"type": type(error).__name__, "message": str(error)}
    return doc


def _document(s: Scenario, job: Any, results: list[Any], late: list[dict[str, Any]] | None) -> dict[str, Any]:
    if s.topology == "connect" and s.sources:
        doc = _connect_parts(results, job.combined_watermarks())
    else:
        doc = _document_parts(results, late or [], job.combined_watermarks())
    name = next(iter(job.watermark_history))
    if not s.per_event:
        doc["batch_watermarks"] = [b.windows[name]["combined_watermark"] for b in job.batches if not b.end_of_input]
    if job.batches:
        doc["partition_watermarks_final"] = job.batches[-1].windows[name]["partition_watermarks"]
    return doc


def _connect_parts(rows: list[Any], watermarks: list[int]) -> dict[str, Any]:
    elements = [{k: r[k] for k in ("source", "key", "ts", "current_watermark", "partition")}
                for r in rows if r["kind"] == "element"]
    timers = [{k: r[k] for k in ("timer", "key", "current_watermark")} for r in rows if r["kind"] == "timer"]
    return {"elements": elements, "timers": timers, "watermarks": [{"watermark": w} for w in watermarks]}


def _document_parts(results: list[Any], late: list[dict[str, Any]], watermarks: list[int]) -> dict[str, Any]:
    out_results = [
        {"key": r.key, "window_start": r.window_start, "window_end": r.window_end,
         "value": r.value, "fire_index": r.fire_index}
        for r in results
    ]
    out_late = [
        {"key": e["key"], "ts": e["ts"], "value": e["value"], "partition": e.get("partition", 0),
         **({"source": e["source"]} if "source" in e else {})}
        for e in late
    ]
    return {"results": out_results, "late": out_late, "watermarks": [{"watermark": w} for w in watermarks]}
