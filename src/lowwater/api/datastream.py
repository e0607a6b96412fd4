"""DataStream, KeyedStream, WindowedStream and ConnectedStreams: Flink's API, in snake_case.

Every method returns a new stream; nothing is mutated. A pipeline is a graph of
:mod:`~lowwater.graph.transformations` that either runtime runs unchanged::

    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    result = (
        env.from_source(source, WatermarkStrategy.for_bounded_out_of_orderness("5 s")
                        .with_timestamp_assigner(lambda e, prev: e["ts"]))
        .key_by("user")
        .window(TumblingEventTimeWindows.of("1 h"))
        .allowed_lateness("1 min")
        .side_output_late_data(late)
        .sum("amount")
    )
    result.add_sink(sink)
    result.get_side_output(late).add_sink(late_sink)
    env.execute()
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from lowwater.core.errors import BadRecordError, ConfigurationError, PipelineError, not_an_output_tag, shown
from lowwater.core.keys import canonical_key
from lowwater.core.process import KeyedCoProcessFunction, KeyedProcessFunction
from lowwater.core.time import DurationLike, to_millis
from lowwater.core.time_characteristic import TimeCharacteristic
from lowwater.core.watermarks import (
    AssignerWithPeriodicWatermarks,
    AssignerWithPunctuatedWatermarks,
    WatermarkStrategy,
)
from lowwater.core.windows import (
    AggregateFunction,
    AggregatingContents,
    CountTrigger,
    GlobalWindows,
    ListContents,
    PurgingTrigger,
    ReducingContents,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    Trigger,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
    builtin_aggregate,
)
from lowwater.core.windows.operator import WindowFunction
from lowwater.graph.sinks import CollectSink, PrintSink, Sink
from lowwater.graph.transformations import (
    AssignTransformation,
    CoTransformation,
    KeyedCoProcessTransformation,
    KeyedProcessTransformation,
    OneInputTransformation,
    OutputTag,
    SideOutputTransformation,
    SinkTransformation,
    Transformation,
    UnionTransformation,
    WindowTransformation,
)

if TYPE_CHECKING:
    from lowwater.api.environment import StreamExecutionEnvironment

__all__ = ["ConnectedStreams", "DataStream", "KeyedStream", "SingleOutputStream", "WindowedStream"]


def _named(name: object) -> str:
    """An operator's name, a string: PyFlink's ``map(fn, Types.STRING())`` passes its output type
    there, which was taken as the name without a word."""
    if not isinstance(name, str):
        raise ConfigurationError("name", f"expected the operator's name, a string, got {name!r}; a PyFlink "
                                         f"output_type has no counterpart: lowwater types outputs by their values")
    return name


def _function(fn: object, method: str) -> Callable[..., Any]:
    """A map, filter or flat_map function; a PyFlink ``MapFunction`` (an object with ``map``) failed
    at the first element, "object is not callable"."""
    if not callable(fn):
        hint = f"; for a PyFlink {type(fn).__name__}, pass its method: .{method}(f.{method})" \
            if callable(getattr(fn, method, None)) else ""
        raise ConfigurationError("fn", f"{method} takes a function of the element, got {shown(fn)}{hint}")
    return fn


def field_getter(selector: str | Callable[[Any], Any], *, parameter: str, what: str = "field") -> Callable[[Any], Any]:
    """A function from a field name (dict key or attribute) or a function.

    A record where the field is missing or null, or for which the function returns None, raises
    :class:`BadRecordError` (``missing <what> (<name>)``): it goes to the dead-letter output, as the
    semantics table says of a record with no key (Flink's job would fail on the null key; windows
    and state under the key ``None`` gathered every such record without a word). A key (``what``
    ``"key"``) is returned as :func:`canonical_key` makes it."""
    canonical = canonical_key if what == "key" else None
    if callable(selector):
        fn = selector
        missing = BadRecordError.missing(what, getattr(fn, "__qualname__", type(fn).__name__))

        @functools.wraps(fn)
        def keyed(e: Any) -> Any:
            k = fn(e)
            if k is None:
                raise BadRecordError(missing)
            return k if canonical is None else canonical(k)

        return keyed
    if not isinstance(selector, str):
        hint = f"; for a PyFlink {type(selector).__name__}, pass its method: .key_by(k.get_key)" \
            if callable(getattr(selector, "get_key", None)) else ""
        raise ConfigurationError(parameter, f"expected a field name or a function, got {type(selector).__name__}"
                                            f"{hint}")
    name = selector
    reason = BadRecordError.missing(what, name)

    def get(e: Any) -> Any:
        v = e.get(name) if isinstance(e, dict) else getattr(e, name, None)
        if v is None:
            raise BadRecordError(reason)
        return v if canonical is None else canonical(v)

    get.__qualname__ = f"field {name!r}"
    get.field_name = name  # type: ignore[attr-defined]  # lets engines read it as a column
    return get


class DataStream:
    """A stream of elements, partitioned like its source until a ``key_by``."""

    def __init__(self, env: StreamExecutionEnvironment, transformation: Transformation) -> None:
        self.env = env
        self.transformation = transformation

    def _then(self, t: Transformation) -> DataStream:
        return DataStream(self.env, t)

    def name(self, name: str) -> DataStream:
        """Name the operator that made this stream, as PyFlink's ``.name("parse")`` after it:
        the same as its ``name`` argument (errors, metrics and a source's ``source`` column say
        it). A name is no part of the state, so a rename keeps the checkpoint."""
        object.__setattr__(self.transformation, "name", _named(name))  # the operator's own, as Flink's
        return self

    # -- stateless ------------------------------------------------------------------------
    def map(self, fn: Callable[[Any], Any], name: str = "map") -> DataStream:
        return self._then(OneInputTransformation(_named(name), self.transformation, "map", _function(fn, "map")))

    def filter(self, fn: Callable[[Any], bool], name: str = "filter") -> DataStream:
        return self._then(OneInputTransformation(_named(name), self.transformation, "filter",
                                                 _function(fn, "filter")))

    def flat_map(self, fn: Callable[[Any], Iterable[Any]], name: str = "flat_map") -> DataStream:
        return self._then(OneInputTransformation(_named(name), self.transformation, "flat_map",
                                                 _function(fn, "flat_map")))

    # -- event time -----------------------------------------------------------------------
    def assign_timestamps_and_watermarks(
        self,
        strategy: WatermarkStrategy[Any] | AssignerWithPeriodicWatermarks[Any] | AssignerWithPunctuatedWatermarks[Any],
        name: str = "timestamps/watermarks",
    ) -> DataStream:
        """Assign timestamps and generate watermarks, one generator per source partition.

        Overrides the timestamps and watermarks that the source (or an earlier
        assignment) supplied. Accepts a :class:`WatermarkStrategy` or a classic assigner.
        """
        if isinstance(strategy, (AssignerWithPeriodicWatermarks, AssignerWithPunctuatedWatermarks)):
            strategy = WatermarkStrategy.for_legacy(strategy)
        if not isinstance(strategy, WatermarkStrategy):
            raise ConfigurationError(
                "strategy", f"expected a WatermarkStrategy or a classic assigner, got {type(strategy).__name__}"
            )
        return self._then(AssignTransformation(name, self.transformation, strategy))

    # -- partitioning and combining ---------------------------------------------------
    def key_by(self, key_selector: str | Callable[[Any], Any]) -> KeyedStream:
        return KeyedStream(self, field_getter(key_selector, parameter="key_selector", what="key"))

    def union(self, *others: DataStream) -> DataStream:
        """All elements of all streams; the watermark is the minimum of the inputs."""
        if not others:
            raise PipelineError("union needs at least one other stream")
        return self._then(UnionTransformation("union", (self.transformation, *(o.transformation for o in others))))

    def connect(self, other: DataStream) -> ConnectedStreams:
        return ConnectedStreams(self, other)

    # -- sinks ------------------------------------------------------------------------------
    def add_sink(self, sink: Sink, name: str = "sink") -> DataStream:
        if not isinstance(sink, Sink):
            raise ConfigurationError("sink", f"expected a lowwater Sink, got {type(sink).__name__}")
        t = SinkTransformation(name, self.transformation, sink)
        self.env._register_sink(t)
        return self._then(t)

    sink_to = add_sink

    def print(self, prefix: str = "") -> DataStream:
        return self.add_sink(PrintSink(prefix), name="print")

    def collect(self) -> CollectSink:
        """Attach an in-memory sink; read its ``results`` after ``env.execute()``."""
        sink = CollectSink()
        self.add_sink(sink, name="collect")
        return sink


class SingleOutputStream(DataStream):
    """The output of a window or keyed process operator, with its side outputs."""

    def get_side_output(self, tag: OutputTag) -> DataStream:
        if not isinstance(tag, OutputTag):
            raise ConfigurationError("tag", not_an_output_tag(tag, "get_side_output", "the function outputs to"))
        return self._then(SideOutputTransformation(f"side output {tag.name}", self.transformation, tag))


@dataclass(frozen=True)
class KeyedStream:
    """A stream partitioned by key: ``window``, ``time_window`` or ``count_window`` next."""

    stream: DataStream
    key_selector: Callable[[Any], Any]

    def connect(self, other: KeyedStream) -> ConnectedStreams:
        """PyFlink's ``ds1.key_by(k1).connect(ds2.key_by(k2))``: the two inputs keyed as they are,
        as ``ds1.connect(ds2).key_by(k1, k2)``, for ``process(KeyedCoProcessFunction)``."""
        if not isinstance(other, KeyedStream):
            raise ConfigurationError("other", f"a keyed stream connects to another keyed stream, got "
                                              f"{type(other).__name__}: key it first (.key_by(...)), or connect "
                                              "the unkeyed streams and key both (a.connect(b).key_by(k1, k2))")
        return ConnectedStreams(self.stream, other.stream, self.key_selector, other.key_selector)

    def window(self, assigner: WindowAssigner[Any]) -> WindowedStream:
        if not isinstance(assigner, WindowAssigner):
            raise ConfigurationError("assigner", f"expected a WindowAssigner, got {type(assigner).__name__}")
        return WindowedStream(self, assigner)

    def time_window(self, size: DurationLike, slide: DurationLike | None = None) -> WindowedStream:
        """Tumbling (or sliding) windows in the environment's time characteristic."""
        processing = self.stream.env.time_characteristic is TimeCharacteristic.PROCESSING_TIME
        size_ms = to_millis(size, name="size")
        if slide is None:
            assigner: WindowAssigner[Any] = (
                TumblingProcessingTimeWindows(size_ms) if processing else TumblingEventTimeWindows(size_ms)
            )
        else:
            slide_ms = to_millis(slide, name="slide")
            assigner = (
                SlidingProcessingTimeWindows(size_ms, slide_ms) if processing
                else SlidingEventTimeWindows(size_ms, slide_ms)
            )
        return self.window(assigner)

    def count_window(self, size: int) -> WindowedStream:
        """Fires and purges every ``size`` elements per key."""
        return self.window(GlobalWindows.create()).trigger(PurgingTrigger.of(CountTrigger.of(size)))

    def process(self, function: KeyedProcessFunction, name: str = "keyed process") -> SingleOutputStream:
        """Run a :class:`~lowwater.core.process.KeyedProcessFunction` per key, with keyed state
        and event- and processing-time timers (see :mod:`lowwater.core.process.functions`)."""
        if not isinstance(function, KeyedProcessFunction):
            raise ConfigurationError(
                "function", f"expected a KeyedProcessFunction, got {type(function).__name__}; subclass "
                "lowwater.api.KeyedProcessFunction and implement process_element(value, ctx)",
            )
        _check_implements(function, KeyedProcessFunction, "process_element")
        stream = self.stream
        t = KeyedProcessTransformation(_named(name), stream.transformation, self.key_selector, function)
        return SingleOutputStream(stream.env, t)


@dataclass(frozen=True)
class WindowedStream:
    """Keyed windows being configured (trigger, allowed lateness, late side output); a
    window function (``aggregate``, ``reduce``, ``process``, ``sum``...) completes it."""

    keyed: KeyedStream
    assigner: WindowAssigner[Any]
    trigger_: Trigger[Any] | None = None
    allowed_lateness_ms: int = 0
    late_tag: OutputTag | None = None

    def trigger(self, trigger: Trigger[Any]) -> WindowedStream:
        if not isinstance(trigger, Trigger):
            raise ConfigurationError("trigger", f"expected a Trigger, got {type(trigger).__name__}")
        return replace(self, trigger_=trigger)

    def allowed_lateness(self, lateness: DurationLike) -> WindowedStream:
        ms = to_millis(lateness, name="allowed_lateness")
        if ms < 0:
            raise ConfigurationError("allowed_lateness", f"The allowed lateness cannot be negative, got {ms} ms")
        return replace(self, allowed_lateness_ms=ms)

    def side_output_late_data(self, tag: OutputTag) -> WindowedStream:
        if not isinstance(tag, OutputTag):
            raise ConfigurationError("tag", f"expected an OutputTag, got {type(tag).__name__}")
        return replace(self, late_tag=tag)

    # -- window functions -------------------------------------------------------------
    def aggregate(
        self, function: AggregateFunction[Any, Any, Any] | str, window_function: WindowFunction | None = None,
        *, field: str | Callable[[Any], Any] | None = None,
    ) -> SingleOutputStream:
        """Aggregate each window incrementally.

        ``function`` is an :class:`AggregateFunction` or a built-in name (``"sum"``,
        ``"count"``, ``"min"``, ``"max"``, ``"avg"``) applied to ``field``. Without a
        ``window_function`` each firing emits ``WindowResult(key, window_start,
        window_end, value, fire_index)``.
        """
        if isinstance(function, str):
            function = builtin_aggregate(function, field)
        if not isinstance(function, AggregateFunction):
            raise ConfigurationError(
                "aggregate", f"expected an AggregateFunction or a name, got {type(function).__name__}"
            )
        return self._build("aggregate", AggregatingContents(function), window_function)

    def reduce(
        self, function: Callable[[Any, Any], Any], window_function: WindowFunction | None = None
    ) -> SingleOutputStream:
        """Reduce each window's elements pairwise; emits ``WindowResult`` rows by default."""
        if not callable(function):
            hint = f"; for a PyFlink {type(function).__name__}, pass its method: .reduce(f.reduce)" \
                if callable(getattr(function, "reduce", None)) else ""
            raise ConfigurationError("reduce", f"expected a function (a, b) -> c, got {shown(function)}{hint}")
        return self._build("reduce", ReducingContents(function), window_function)

    def process(self, function: WindowFunction) -> SingleOutputStream:
        """Give the function every element of a firing window plus a context."""
        return self._build("process", ListContents(), function)

    def sum(self, field: str | Callable[[Any], Any]) -> SingleOutputStream:
        return self.aggregate("sum", field=field)

    def min(self, field: str | Callable[[Any], Any]) -> SingleOutputStream:
        return self.aggregate("min", field=field)

    def max(self, field: str | Callable[[Any], Any]) -> SingleOutputStream:
        return self.aggregate("max", field=field)

    def avg(self, field: str | Callable[[Any], Any]) -> SingleOutputStream:
        return self.aggregate("avg", field=field)

    def count(self) -> SingleOutputStream:
        return self.aggregate("count")

    def _build(self, name: str, contents: Any, window_function: WindowFunction | None) -> SingleOutputStream:
        stream = self.keyed.stream
        t = WindowTransformation(
            f"window {name}", stream.transformation, self.keyed.key_selector, self.assigner, contents,
            self.trigger_, self.allowed_lateness_ms, self.late_tag, window_function,
        )
        return SingleOutputStream(stream.env, t)


@dataclass(frozen=True)
class ConnectedStreams:
    """Two streams processed by one operator; its watermark is the minimum of both.

    ``key_by(k1, k2)`` keys both inputs (``k1`` for the first, ``k2`` for the second), after
    which ``process(KeyedCoProcessFunction)`` runs with keyed state and timers.
    """

    first: DataStream
    second: DataStream
    key_selector1: Callable[[Any], Any] | None = None
    key_selector2: Callable[[Any], Any] | None = None

    def key_by(self, key_selector1: str | Callable[[Any], Any],
               key_selector2: str | Callable[[Any], Any] | None = None) -> ConnectedStreams:
        """Key both inputs; with one selector, the same for both."""
        k1 = field_getter(key_selector1, parameter="key_selector1", what="key")
        k2 = k1 if key_selector2 is None else field_getter(key_selector2, parameter="key_selector2", what="key")
        return replace(self, key_selector1=k1, key_selector2=k2)

    def process(self, function: KeyedCoProcessFunction, name: str = "keyed co-process") -> SingleOutputStream:
        """Run a :class:`~lowwater.core.process.KeyedCoProcessFunction` over the keyed inputs."""
        if self.key_selector1 is None or self.key_selector2 is None:
            raise PipelineError("connect(...).process needs keys: connect(other).key_by(k1, k2).process(fn)")
        if not isinstance(function, KeyedCoProcessFunction):
            raise ConfigurationError(
                "function", f"expected a KeyedCoProcessFunction, got {type(function).__name__}; subclass "
                "lowwater.api.KeyedCoProcessFunction and implement process_element1 and process_element2",
            )
        _check_implements(function, KeyedCoProcessFunction, "process_element1", "process_element2")
        t = KeyedCoProcessTransformation(name, self.first.transformation, self.second.transformation,
                                         self.key_selector1, self.key_selector2, function)
        return SingleOutputStream(self.first.env, t)

    def map(self, fn1: Callable[[Any], Any] | Any, fn2: Callable[[Any], Any] | None = None) -> DataStream:
        """``map(f1, f2)`` or ``map(co_map_function)`` with ``map1``/``map2`` methods."""
        f1, f2 = _pair(fn1, fn2, "map1", "map2")
        t = CoTransformation("co-map", self.first.transformation, self.second.transformation, f1, f2)
        return self.first._then(t)

    def flat_map(
        self, fn1: Callable[[Any], Iterable[Any]] | Any, fn2: Callable[[Any], Iterable[Any]] | None = None
    ) -> DataStream:
        f1, f2 = _pair(fn1, fn2, "flat_map1", "flat_map2")
        return self.first._then(
            CoTransformation("co-flat-map", self.first.transformation, self.second.transformation, f1, f2, flat=True)
        )


def _pair(fn1: Any, fn2: Any, m1: str, m2: str) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    if fn2 is None:
        if hasattr(fn1, m1) and hasattr(fn1, m2):
            return getattr(fn1, m1), getattr(fn1, m2)
        raise ConfigurationError("function", f"give two functions, or one object with {m1} and {m2}")
    return fn1, fn2


def _check_implements(function: object, base: type, *methods: str) -> None:
    """Refuse a process function that leaves one of ``methods`` as ``base`` has it: its first element
    failed the job with a bare ``NotImplementedError``, naming neither the method nor the input."""
    missing = [m for m in methods if getattr(type(function), m, None) is getattr(base, m)]
    if missing:
        raise ConfigurationError(
            "function", f"{type(function).__name__} does not implement {' and '.join(missing)}(value, ctx), "
            f"which {base.__name__} needs" + (": process_element1 takes the first input's elements, "
                                              "process_element2 the second's" if len(methods) == 2 else ""))
