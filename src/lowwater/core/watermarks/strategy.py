"""``WatermarkStrategy``: an immutable recipe for a timestamp assigner and a generator."""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, TypeVar

from lowwater.core.clock import Clock, ManualClock, SystemClock
from lowwater.core.errors import ConfigurationError
from lowwater.core.time import DurationLike, to_millis
from lowwater.core.watermarks.assigner import (
    FieldTimestampAssigner,
    IngestionTimeAssigner,
    RecordTimestampAssigner,
    TimestampAssigner,
    as_timestamp_assigner,
)
from lowwater.core.watermarks.bounded import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
)
from lowwater.core.watermarks.generator import WatermarkGenerator
from lowwater.core.watermarks.idleness import IdlenessTimer, WatermarksWithIdleness
from lowwater.core.watermarks.legacy import (
    AssignerWithPeriodicWatermarks,
    AssignerWithPunctuatedWatermarks,
    legacy_watermarks,
)
from lowwater.core.watermarks.no_watermarks import NoWatermarksGenerator
from lowwater.core.watermarks.punctuated import PunctuatedWatermarks
from lowwater.core.watermarks.time_lag import TimeLagWatermarkGenerator

__all__ = ["BuiltinKind", "PartitionWatermarking", "WatermarkGeneratorContext", "WatermarkStrategy"]

T = TypeVar("T")

BuiltinKind = Literal[
    "bounded_out_of_orderness", "time_lag", "no_watermarks", "legacy_bounded", "custom"
]
"""What an engine may reduce to per-partition aggregates (``custom`` runs the generator)."""


def _arity(fn: Callable[..., Any]) -> int:
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


@dataclass(frozen=True)
class WatermarkGeneratorContext:
    """What a generator gets when it is created for one partition."""

    partition: Hashable = 0
    clock: Clock = field(default_factory=SystemClock)


@dataclass
class PartitionWatermarking(Generic[T]):
    """A partition's timestamp assigner and (idleness-wrapped) generator."""

    assigner: TimestampAssigner[T]
    generator: WatermarkGenerator[T]


GeneratorFactory = Callable[[WatermarkGeneratorContext], WatermarkGenerator[Any]]
AssignerFactory = Callable[[WatermarkGeneratorContext], TimestampAssigner[Any]]


@dataclass(frozen=True)
class WatermarkStrategy(Generic[T]):
    """How timestamps are assigned and watermarks generated, per source partition.

    Builder methods return new strategies; a strategy is never mutated.

    >>> s = WatermarkStrategy.for_bounded_out_of_orderness("3 s").with_idleness("1 min")
    >>> s.idleness_ms, s.builtin_param_ms
    (60000, 3000)
    """

    generator_factory: GeneratorFactory
    assigner_factory: AssignerFactory | None = None
    idleness_ms: int | None = None
    builtin: BuiltinKind = "custom"
    builtin_param_ms: int | None = None
    legacy_assigner: Any = None
    description: str = "custom"
    assigner_prototype: TimestampAssigner[Any] | None = None

    # -- constructors ---------------------------------------------------------------
    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: DurationLike) -> WatermarkStrategy[Any]:
        """Watermark ``max_ts - B - 1``; ``MIN`` before any event."""
        b = to_millis(max_out_of_orderness, name="max_out_of_orderness")
        if b < 0:
            raise ConfigurationError("max_out_of_orderness", f"must be >= 0 ms, got {b}")
        return WatermarkStrategy(
            lambda ctx: BoundedOutOfOrdernessWatermarks(b),
            builtin="bounded_out_of_orderness",
            builtin_param_ms=b,
            description=f"bounded out-of-orderness {b} ms",
        )

    @staticmethod
    def for_monotonous_timestamps() -> WatermarkStrategy[Any]:
        """Ascending timestamps: watermark ``max_ts - 1``."""
        return WatermarkStrategy(
            lambda ctx: AscendingTimestampsWatermarks(),
            builtin="bounded_out_of_orderness",
            builtin_param_ms=0,
            description="monotonous timestamps",
        )

    @staticmethod
    def for_time_lag(lag: DurationLike) -> WatermarkStrategy[Any]:
        """Watermark ``now - lag`` in processing time; advances with no data arriving."""
        lag_ms = to_millis(lag, name="lag")
        if lag_ms < 0:
            raise ConfigurationError("lag", f"must be >= 0 ms, got {lag_ms}")
        return WatermarkStrategy(
            lambda ctx: TimeLagWatermarkGenerator(lag_ms, ctx.clock),
            builtin="time_lag",
            builtin_param_ms=lag_ms,
            description=f"time lag {lag_ms} ms",
        )

    @staticmethod
    def for_punctuated(check: Callable[[T, int], int | None]) -> WatermarkStrategy[T]:
        """``check(element, ts)`` after every element; a non-None result is a watermark."""
        return WatermarkStrategy(lambda ctx: PunctuatedWatermarks(check), description="punctuated")

    @staticmethod
    def for_generator(factory: GeneratorFactory | Callable[[], WatermarkGenerator[T]]) -> WatermarkStrategy[T]:
        """A user generator. ``factory(ctx)`` (or ``factory()``) makes one per partition."""
        takes_ctx = _arity(factory) >= 1

        def make(ctx: WatermarkGeneratorContext) -> WatermarkGenerator[Any]:
            return factory(ctx) if takes_ctx else factory()  # type: ignore[call-arg]

        return WatermarkStrategy(make, description=f"generator {getattr(factory, '__qualname__', factory)}")

    @staticmethod
    def no_watermarks() -> WatermarkStrategy[Any]:
        """Never emits: event-time windows fire only at the end of bounded input."""
        return WatermarkStrategy(
            lambda ctx: NoWatermarksGenerator(), builtin="no_watermarks", description="no watermarks"
        )

    @staticmethod
    def for_ingestion_time() -> WatermarkStrategy[Any]:
        """Ingestion time: timestamp = the clock at entry; watermarks ascending (``ts - 1``), as Flink 2.x's
        ``IngestionTimeAssigner`` with monotonous watermarks: in a quiet period the watermark stays where the
        last record left it (Flink 1.x's ``TimeCharacteristic.IngestionTime`` advanced it with the clock)."""
        return WatermarkStrategy(
            lambda ctx: AscendingTimestampsWatermarks(),
            assigner_factory=lambda ctx: IngestionTimeAssigner(ctx.clock),
            description="ingestion time",
        )

    @staticmethod
    def for_legacy(
        assigner: AssignerWithPeriodicWatermarks[T] | AssignerWithPunctuatedWatermarks[T],
    ) -> WatermarkStrategy[T]:
        """Adapt a classic assigner; each partition gets its own copy of it."""
        legacy_watermarks(assigner)  # validates the type
        return WatermarkStrategy(
            lambda ctx: legacy_watermarks(copy.deepcopy(assigner)),
            legacy_assigner=assigner,
            description=type(assigner).__name__,
        )

    # -- builders -------------------------------------------------------------------
    def with_timestamp_assigner(
        self, assigner: TimestampAssigner[T] | Callable[[T, int], int] | Callable[[T], int] | str
    ) -> WatermarkStrategy[T]:
        """A new strategy whose timestamps come from ``assigner`` (one copy per partition).

        A field name (``"ts"``) lets the Spark engine read the timestamp as a column.
        """
        prototype = as_timestamp_assigner(assigner)
        return replace(self, assigner_factory=lambda ctx: copy.deepcopy(prototype), assigner_prototype=prototype)

    def with_idleness(self, idle_timeout: DurationLike) -> WatermarkStrategy[T]:
        """A new strategy that marks a partition idle after ``idle_timeout`` without elements."""
        ms = to_millis(idle_timeout, name="idleness")
        if ms <= 0:
            raise ConfigurationError("idleness", f"must be > 0 ms, got {ms}")
        return replace(self, idleness_ms=ms)

    # -- creation -------------------------------------------------------------------
    def create_watermark_generator(self, ctx: WatermarkGeneratorContext) -> WatermarkGenerator[T]:
        return self.create_partition(ctx).generator

    def create_timestamp_assigner(self, ctx: WatermarkGeneratorContext) -> TimestampAssigner[T]:
        return self.create_partition(ctx).assigner

    def create_partition(self, ctx: WatermarkGeneratorContext) -> PartitionWatermarking[T]:
        """The assigner and generator for one partition, sharing state where they must."""
        generator: WatermarkGenerator[T] = self.generator_factory(ctx)
        assigner: TimestampAssigner[T]
        if self.legacy_assigner is not None and self.assigner_factory is None:
            assigner = generator.assigner  # type: ignore[attr-defined]
        elif self.assigner_factory is not None:
            assigner = self.assigner_factory(ctx)
        else:
            assigner = RecordTimestampAssigner()
        if self.idleness_ms is not None:
            generator = WatermarksWithIdleness(generator, self.idleness_ms, ctx.clock)
        return PartitionWatermarking(assigner, generator)

    @property
    def timestamp_origin(self) -> str | None:
        """Who gives an element its timestamp under this strategy, as a dead letter's reason names it
        (:meth:`~lowwater.core.errors.BadRecordError.timestamp_origin`): ``None`` for the record's
        own (the source's) timestamp, ``""`` for a field assigner (which judges its values itself, so
        a window never gets a bad one from it), else the Python assigner or classic extractor."""
        if self.legacy_assigner is not None and self.assigner_factory is None:
            return type(self.legacy_assigner).__name__
        proto = self.assigner_prototype
        if isinstance(proto, FieldTimestampAssigner):
            return ""
        if proto is None and self.assigner_factory is not None:
            return ""  # ingestion time: the clock
        return None if proto is None or isinstance(proto, RecordTimestampAssigner) else repr(proto)

    def __repr__(self) -> str:
        idle = f", idleness {self.idleness_ms} ms" if self.idleness_ms is not None else ""
        return f"WatermarkStrategy({self.description}{idle})"

    def settings(self) -> dict[str, str] | None:
        """What the assigner and generator this strategy builds hold as data when built (a field
        name, a bound a user's generator was given), for a checkpoint to be bound to: a restart
        carries their data over into the objects the current code builds (a maximum timestamp, an
        idleness timer), so a setting edited between two runs was overwritten by the old one, on
        some paths and not others (a user probe, session 56). Values that differ between two builds
        (a time, a random id) are left out, as is code (a fixed function takes effect). A built-in
        strategy's generator is not looked into, its description says it (:meth:`__repr__`), nor
        is the idleness wrapper; a classic extractor's bound and a violation handler's class are
        (:meth:`for_legacy`), and a field assigner's field. By attribute path (``generator.bound``);
        ``None`` when the strategy cannot be built outside a run."""
        try:
            built = [self.create_partition(WatermarkGeneratorContext(partition=0, clock=ManualClock(0)))
                     for _ in range(2)]
            deep = self.builtin == "custom"  # a built-in's settings are in its description
            seen = [{**_data_of(p.assigner, "assigner", deep), **_data_of(p.generator, "generator", deep)}
                    for p in built]
        except Exception:
            return None
        return {k: v for k, v in sorted(seen[0].items()) if seen[1].get(k) == v} or None


_PLAIN = (type(None), bool, int, float, str)


def _data_of(obj: object, path: str, deep: bool, depth: int = 0) -> dict[str, str]:
    """The class and plain data attributes of ``obj`` and of the objects it holds, a few levels down,
    by their path, as text (:meth:`WatermarkStrategy.settings`); with ``deep`` false, only a field
    assigner's field and user classes'."""
    if isinstance(obj, IdlenessTimer | ManualClock | SystemClock):  # the description has the timeout; a run's clock
        return {}
    ours = type(obj).__module__.startswith("lowwater.")
    said = (deep or not ours) and not isinstance(obj, WatermarksWithIdleness)
    out: dict[str, str] = {path: type(obj).__qualname__} if said else {}
    if isinstance(obj, FieldTimestampAssigner):
        out[f"{path}.field"] = repr(obj.field)
    attrs = getattr(obj, "__dict__", None)
    if depth > 3 or not isinstance(attrs, dict):
        return out
    for name, value in attrs.items():
        if isinstance(value, _PLAIN) or (isinstance(value, list | tuple) and all(isinstance(v, _PLAIN) for v in value)):
            if said:
                out[f"{path}.{name}"] = repr(value)
        elif hasattr(value, "__dict__") and not callable(value) and type(value).__module__ != "builtins":
            out.update(_data_of(value, f"{path}.{name}", deep, depth + 1))
    return out
