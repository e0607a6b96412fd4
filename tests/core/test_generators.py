"""Watermark generators and strategies, per DESIGN §1 and Flink's generator classes.

Expected values come from Flink's formulas: ``BoundedOutOfOrdernessWatermarks`` emits
``max_ts - B - 1`` (``MIN`` before any event), time lag ``now - lag``, punctuated the
element's own timestamp.
"""

from __future__ import annotations

from typing import Any

import pytest

from lowwater.core.clock import ManualClock
from lowwater.core.errors import ConfigurationError
from lowwater.core.time import MIN_TIMESTAMP
from lowwater.core.watermarks import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    NoWatermarksGenerator,
    PunctuatedWatermarks,
    RecordingOutput,
    RecordTimestampAssigner,
    TimeLagWatermarkGenerator,
    Watermark,
    WatermarkGeneratorContext,
    WatermarkStrategy,
    WatermarksWithIdleness,
)


def _emit(gen: Any, out: RecordingOutput) -> int:
    gen.on_periodic_emit(out)
    return out.watermarks[-1]


# -- bounded out-of-orderness ------------------------------------------------------------------
def test_bounded_out_of_orderness_is_min_before_any_event() -> None:
    out = RecordingOutput()
    gen = BoundedOutOfOrdernessWatermarks(3_000)
    assert _emit(gen, out) == MIN_TIMESTAMP


@pytest.mark.parametrize("bound", [0, 1, 3_000, 2**62])
def test_bounded_out_of_orderness_never_goes_below_min_before_events(bound: int) -> None:
    out = RecordingOutput()
    assert _emit(BoundedOutOfOrdernessWatermarks(bound), out) == MIN_TIMESTAMP


def test_bounded_out_of_orderness_is_max_timestamp_minus_bound_minus_one() -> None:
    out = RecordingOutput()
    gen = BoundedOutOfOrdernessWatermarks(3_000)
    gen.on_event("x", 10_000, out)
    assert _emit(gen, out) == 10_000 - 3_000 - 1
    gen.on_event("x", 12_500, out)
    assert _emit(gen, out) == 12_500 - 3_000 - 1


def test_bounded_out_of_orderness_ignores_an_older_timestamp() -> None:
    out = RecordingOutput()
    gen = BoundedOutOfOrdernessWatermarks(1_000)
    gen.on_event("x", 10_000, out)
    gen.on_event("x", 2_000, out)
    assert _emit(gen, out) == 8_999


def test_bounded_out_of_orderness_emits_only_at_periodic_emit() -> None:
    out = RecordingOutput()
    gen = BoundedOutOfOrdernessWatermarks(0)
    gen.on_event("x", 10_000, out)
    assert out.events == []


def test_negative_out_of_orderness_is_rejected() -> None:
    with pytest.raises(ConfigurationError) as e:
        BoundedOutOfOrdernessWatermarks(-1)
    assert "max_out_of_orderness" in str(e.value)
    with pytest.raises(ConfigurationError) as e2:
        WatermarkStrategy.for_bounded_out_of_orderness(-1)
    assert e2.value.parameter == "max_out_of_orderness"


def test_monotonous_timestamps_is_bounded_out_of_orderness_with_zero_bound() -> None:
    out = RecordingOutput()
    gen = AscendingTimestampsWatermarks()
    assert _emit(gen, out) == MIN_TIMESTAMP
    gen.on_event("x", 5_000, out)
    assert _emit(gen, out) == 4_999


def test_strategy_for_bounded_out_of_orderness_accepts_durations_at_the_edge() -> None:
    out = RecordingOutput()
    gen = WatermarkStrategy.for_bounded_out_of_orderness("3 s").create_watermark_generator(
        WatermarkGeneratorContext()
    )
    gen.on_event("x", 10_000, out)
    assert _emit(gen, out) == 6_999


def test_strategy_for_monotonous_timestamps_emits_max_minus_one() -> None:
    out = RecordingOutput()
    gen = WatermarkStrategy.for_monotonous_timestamps().create_watermark_generator(
        WatermarkGeneratorContext()
    )
    gen.on_event("x", 42, out)
    assert _emit(gen, out) == 41


# -- time lag ----------------------------------------------------------------------------------
def test_time_lag_is_now_minus_lag_without_minus_one() -> None:
    clock = ManualClock(12_000)
    out = RecordingOutput()
    gen = TimeLagWatermarkGenerator(5_000, clock)
    assert _emit(gen, out) == 7_000


def test_time_lag_advances_with_the_clock_and_no_events() -> None:
    clock = ManualClock(10_000)
    out = RecordingOutput()
    gen = WatermarkStrategy.for_time_lag("5 s").create_watermark_generator(
        WatermarkGeneratorContext(clock=clock)
    )
    assert _emit(gen, out) == 5_000
    clock.advance(2_500)
    assert _emit(gen, out) == 7_500


def test_time_lag_ignores_event_timestamps() -> None:
    clock = ManualClock(10_000)
    out = RecordingOutput()
    gen = TimeLagWatermarkGenerator(1_000, clock)
    gen.on_event("x", 1_000_000, out)
    assert out.events == []
    assert _emit(gen, out) == 9_000


def test_negative_time_lag_is_rejected_naming_lag() -> None:
    with pytest.raises(ConfigurationError) as e:
        WatermarkStrategy.for_time_lag(-1)
    assert e.value.parameter == "lag"


# -- punctuated --------------------------------------------------------------------------------
def test_punctuated_emits_the_elements_own_timestamp_when_the_check_says_so() -> None:
    out = RecordingOutput()
    gen = PunctuatedWatermarks(lambda e, ts: ts if e.get("mark") else None)
    gen.on_event({"mark": False}, 5, out)
    assert out.events == []
    gen.on_event({"mark": True}, 7, out)
    assert out.watermarks == [7]
    gen.on_periodic_emit(out)
    assert out.watermarks == [7]


def test_punctuated_check_sees_the_element_and_its_extracted_timestamp() -> None:
    seen: list[tuple[Any, int]] = []

    def check(e: Any, ts: int) -> None:
        seen.append((e, ts))

    gen = WatermarkStrategy.for_punctuated(check).create_watermark_generator(
        WatermarkGeneratorContext()
    )
    gen.on_event("a", 1, RecordingOutput())
    gen.on_event("b", 2, RecordingOutput())
    assert seen == [("a", 1), ("b", 2)]


def test_punctuated_takes_only_a_64_bit_time_for_a_watermark() -> None:
    """A string was a watermark (``int("25000")``), and ``2**63`` reached the checkpoint, where every later
    batch failed reading it (a user probe, session 64). A float is truncated, as a timestamp's is."""
    def check(e: Any, ts: int) -> Any:
        return e

    gen, out = PunctuatedWatermarks(check), RecordingOutput()
    for fine, time in ((1500.7, 1500), (Watermark(1600), 1600), (-2**63, -2**63), (2**63 - 1, 2**63 - 1)):
        gen.on_event(fine, 0, out)
        assert out.watermarks[-1] == time
    for wrong in ("25000", True, float("nan"), float("inf"), [1]):
        with pytest.raises(TypeError, match=r"the punctuated watermark function '.*check' returned "):
            gen.on_event(wrong, 0, out)
    for far in (2**63, -2**63 - 1, 1e19):
        with pytest.raises(ValueError, match="in the signed 64-bit range"):
            gen.on_event(far, 0, out)
    with pytest.raises(ValueError, match="in the signed 64-bit range, got 9223372036854775808"):
        out.emit_watermark(Watermark(2**63))  # a generator of the user's own, not a punctuated one
    with pytest.raises(TypeError, match=r"got Watermark\('25000'\) \(str\)"):
        out.emit_watermark(Watermark("25000"))  # type: ignore[arg-type]


def test_no_watermarks_never_emits() -> None:
    out = RecordingOutput()
    gen = NoWatermarksGenerator()
    gen.on_event("x", 10, out)
    gen.on_periodic_emit(out)
    assert out.events == []


# -- timestamp assigners -----------------------------------------------------------------------
def test_without_an_assigner_the_source_timestamp_is_kept() -> None:
    part = WatermarkStrategy.for_monotonous_timestamps().create_partition(
        WatermarkGeneratorContext()
    )
    assert isinstance(part.assigner, RecordTimestampAssigner)
    assert part.assigner.extract_timestamp({"ts": 1}, 999) == 999


def test_a_two_argument_assigner_receives_the_previous_timestamp() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda e, prev: e["ts"] + prev
    )
    assigner = strategy.create_timestamp_assigner(WatermarkGeneratorContext())
    assert assigner.extract_timestamp({"ts": 10}, 5) == 15


def test_a_one_argument_assigner_receives_only_the_element() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda e: e["ts"]
    )
    assigner = strategy.create_timestamp_assigner(WatermarkGeneratorContext())
    assert assigner.extract_timestamp({"ts": 10}, 5) == 10


def test_a_non_callable_assigner_is_rejected() -> None:
    with pytest.raises(ConfigurationError) as e:
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(42)  # type: ignore[arg-type]
    assert e.value.parameter == "timestamp_assigner"


# -- strategy builder --------------------------------------------------------------------------
def test_with_idleness_returns_a_new_strategy_and_leaves_the_original_unchanged() -> None:
    base = WatermarkStrategy.for_bounded_out_of_orderness("3 s")
    idle = base.with_idleness("1 min")
    assert idle is not base
    assert base.idleness_ms is None
    assert idle.idleness_ms == 60_000
    ctx = WatermarkGeneratorContext(clock=ManualClock(0))
    assert not isinstance(base.create_watermark_generator(ctx), WatermarksWithIdleness)
    assert isinstance(idle.create_watermark_generator(ctx), WatermarksWithIdleness)


def test_with_timestamp_assigner_returns_a_new_strategy_and_leaves_the_original_unchanged() -> None:
    base = WatermarkStrategy.for_monotonous_timestamps()
    assigned = base.with_timestamp_assigner(lambda e, prev: e["ts"])
    assert assigned is not base
    ctx = WatermarkGeneratorContext()
    assert base.create_timestamp_assigner(ctx).extract_timestamp({"ts": 3}, 100) == 100
    assert assigned.create_timestamp_assigner(ctx).extract_timestamp({"ts": 3}, 100) == 3


def test_strategy_is_frozen() -> None:
    s = WatermarkStrategy.for_monotonous_timestamps()
    with pytest.raises(AttributeError):
        s.idleness_ms = 5  # type: ignore[misc]


def test_builder_chains_keep_both_settings() -> None:
    s = (
        WatermarkStrategy.for_bounded_out_of_orderness(1_000)
        .with_timestamp_assigner(lambda e, prev: e["ts"])
        .with_idleness(500)
    )
    part = s.create_partition(WatermarkGeneratorContext(clock=ManualClock(0)))
    assert part.assigner.extract_timestamp({"ts": 7}, 0) == 7
    assert isinstance(part.generator, WatermarksWithIdleness)


@pytest.mark.parametrize("bad", [0, -5, "0 ms"])
def test_non_positive_idleness_is_rejected_naming_idleness(bad: Any) -> None:
    with pytest.raises(ConfigurationError) as e:
        WatermarkStrategy.for_monotonous_timestamps().with_idleness(bad)
    assert e.value.parameter == "idleness"


def test_each_partition_gets_its_own_generator() -> None:
    s = WatermarkStrategy.for_bounded_out_of_orderness(0)
    g0 = s.create_watermark_generator(WatermarkGeneratorContext(partition=0))
    g1 = s.create_watermark_generator(WatermarkGeneratorContext(partition=1))
    out0, out1 = RecordingOutput(), RecordingOutput()
    g0.on_event("x", 10_000, out0)
    assert _emit(g0, out0) == 9_999
    assert _emit(g1, out1) == MIN_TIMESTAMP


def test_watermark_min_and_max_are_the_extreme_timestamps() -> None:
    assert Watermark.min().timestamp == MIN_TIMESTAMP
    assert Watermark.max().timestamp == 2**63 - 1
    assert Watermark(1) < Watermark(2)


# -- user generators ------------------------------------------------------------------------
class EmitsPartition(BoundedOutOfOrdernessWatermarks):
    def __init__(self, partition: Any) -> None:
        super().__init__(0)
        self.partition = partition


def test_for_generator_gives_a_factory_the_partition_context() -> None:
    strategy = WatermarkStrategy.for_generator(lambda ctx: EmitsPartition(ctx.partition))
    gen = strategy.create_watermark_generator(WatermarkGeneratorContext(partition=7))
    assert isinstance(gen, EmitsPartition)
    assert gen.partition == 7


def test_for_generator_accepts_a_factory_without_arguments() -> None:
    strategy = WatermarkStrategy.for_generator(lambda: BoundedOutOfOrdernessWatermarks(5))
    gen = strategy.create_watermark_generator(WatermarkGeneratorContext())
    assert isinstance(gen, BoundedOutOfOrdernessWatermarks)
    assert gen.max_out_of_orderness_ms == 5


def test_for_generator_does_not_mask_a_type_error_raised_inside_the_factory() -> None:
    calls: list[Any] = []

    def factory(ctx: WatermarkGeneratorContext) -> Any:
        calls.append(ctx)
        raise TypeError("bug in the user's factory")

    with pytest.raises(TypeError, match="bug in the user's factory"):
        WatermarkStrategy.for_generator(factory).create_watermark_generator(
            WatermarkGeneratorContext()
        )
    assert len(calls) == 1
