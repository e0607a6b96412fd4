"""Scenario transcripts (shared/SCENARIOS.md): parse one, build its pipeline, run it.

The pipeline is built with the public API, exactly as a user would write it, so a
scenario exercises the same code on every runtime.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lowwater.api import CollectionSource, OutputTag, StreamExecutionEnvironment
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

__all__ = ["Scenario", "ScenarioError", "load_scenario", "run_scenario"]


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


def _event(e: Any, where: str) -> dict[str, Any]:
    if not isinstance(e, dict):
        raise ScenarioError(where, f"an event must be an object, got {type(e).__name__}")
    _need(e, "key", (str, int), f"{where}.")
    _need(e, "ts", int, f"{where}.")
    _need(e, "value", (int, float), f"{where}.")
    p = _opt(e, "partition", int, f"{where}.", 0)
    return {**e, "partition": p}


def load_scenario(data: dict[str, Any] | str | Path) -> Scenario:
    """Validate a scenario (a dict, or a JSON file path)."""
    if not isinstance(data, dict):
        try:
            data = json.loads(Path(data).read_text())
        except json.JSONDecodeError as err:
            raise ScenarioError("file", f"is not valid JSON: {err}") from None
        if not isinstance(data, dict):
            raise ScenarioError("file", "must hold a JSON object")
    partitions = _opt(data, "partitions", int, "", 1)
    if partitions <= 0:
        raise ScenarioError("partitions", f"must be > 0, got {partitions}")
    if "batches" in data and data["batches"] is not None:
        raw = _need(data, "batches", list, "")
        batches = []
        for i, b in enumerate(raw):
            if not isinstance(b, list):
                raise ScenarioError(f"batches[{i}]", "must be a list of events")
            batches.append([_event(e, f"batches[{i}][{j}]") for j, e in enumerate(b)])
        per_event = False
    else:
        events = _need(data, "events", list, "")
        batches = [[_event(e, f"events[{i}]")] for i, e in enumerate(events)]
        per_event = True
    for b in batches:
        for ev in b:
            if not 0 <= ev["partition"] < partitions:
                raise ScenarioError("partition", f"event partition {ev['partition']} is outside 0..{partitions - 1}")
    pts = None
    if data.get("processing_time_ms") is not None:
        pts = _need(data, "processing_time_ms", list, "")
        if per_event:
            raise ScenarioError("processing_time_ms", "is only allowed with batches")
        if len(pts) != len(batches) or not all(isinstance(t, int) and not isinstance(t, bool) for t in pts):
            raise ScenarioError("processing_time_ms", f"must hold one integer per batch ({len(batches)})")
    wm = _need(data, "watermark", dict, "")
    kind = _need(wm, "kind", str, "watermark.")
    if kind in ("bounded_out_of_orderness", "legacy_bounded"):
        _need(wm, "max_out_of_orderness_ms", int, "watermark.")
    elif kind == "time_lag":
        _need(wm, "lag_ms", int, "watermark.")
    elif kind == "punctuated":
        _need(wm, "field", str, "watermark.")
    elif kind == "legacy_ascending":
        monotony_violation_handler(_opt(wm, "violation_handler", str, "watermark.", "log"))
    elif kind != "monotonous":
        raise ScenarioError(
            "watermark.kind",
            f"unknown kind {kind!r}; use bounded_out_of_orderness, monotonous, legacy_bounded, "
            "legacy_ascending, punctuated or time_lag",
        )
    _opt(wm, "idleness_ms", int, "watermark.", None)
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
    final = _opt(data, "final_watermark", bool, "", True)
    return Scenario(batches, per_event, partitions, pts, wm, win, lateness, aggregate, final)


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


def watermark_strategy(wm: dict[str, Any]) -> WatermarkStrategy[Any]:
    """The strategy a scenario's ``watermark`` object describes."""
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
        raise ScenarioError(_field("watermark", wm, e.parameter), str(e).split(": ", 1)[-1]) from None


def build_pipeline(
    s: Scenario, env: StreamExecutionEnvironment, source: Any = None
) -> tuple[Any, Any, OutputTag]:
    """Source -> per-partition watermarks -> key_by(key) -> window -> aggregate, late side output."""
    if source is None:
        source = CollectionSource(
            s.batches, partitions=s.partitions, partition_of="partition",
            processing_times_ms=s.processing_times_ms,
        )
    strategy = watermark_strategy(s.watermark)
    late = OutputTag("late")
    result = (
        env.from_source(source, strategy, name="scenario")
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
    """Run a scenario and return its output document (shared/SCENARIOS.md)."""
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
    return _document(s, job, results_sink.results, late_sink.results)


def _run_on_spark(s: Scenario, path: str = "auto", spark: Any = None, workdir: str | None = None) -> dict[str, Any]:
    """One Spark micro-batch per scenario batch (per event for ``events``)."""
    import tempfile

    from lowwater.spark.engine import SparkRuntime
    from lowwater.spark.sources import BatchFilesSource

    with tempfile.TemporaryDirectory(prefix="lowwater-scenario-", dir=workdir) as tmp:
        data_dir = Path(tmp) / "input"
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
            doc = _document_parts(results_sink.results, late_sink.results, _history(done))
            doc["error"] = {"type": type(e).__name__, "message": str(e)}
            return doc
        batches = job.batches()
        per_batch = [b["metrics"]["combined_watermark"] for b in batches if not b.get("end_of_input")]
        doc = _document_parts(results_sink.results, late_sink.results, _history(batches))
        if not s.per_event:
            doc["batch_watermarks"] = per_batch
        doc["spark_path"] = job.path
        return doc


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
    window = next(n for n in runtime.nodes if isinstance(n, WindowNode))
    emitted = [[*n.sink.results, *n.rows] for n in sinks]  # type: ignore[attr-defined]
    doc = _document_parts(emitted[0], emitted[1], window.exchange.history)
    doc["error"] = {"type": type(error).__name__, "message": str(error)}
    return doc


def _document(s: Scenario, job: Any, results: list[Any], late: list[dict[str, Any]]) -> dict[str, Any]:
    doc = _document_parts(results, late, job.combined_watermarks())
    name = next(iter(job.watermark_history))
    if not s.per_event:
        doc["batch_watermarks"] = [b.windows[name]["combined_watermark"] for b in job.batches if not b.end_of_input]
    if job.batches:
        doc["partition_watermarks_final"] = job.batches[-1].windows[name]["partition_watermarks"]
    return doc


def _document_parts(results: list[Any], late: list[dict[str, Any]], watermarks: list[int]) -> dict[str, Any]:
    out_results = [
        {"key": r.key, "window_start": r.window_start, "window_end": r.window_end,
         "value": r.value, "fire_index": r.fire_index}
        for r in results
    ]
    out_late = [
        {"key": e["key"], "ts": e["ts"], "value": e["value"], "partition": e.get("partition", 0)} for e in late
    ]
    return {"results": out_results, "late": out_late, "watermarks": [{"watermark": w} for w in watermarks]}

