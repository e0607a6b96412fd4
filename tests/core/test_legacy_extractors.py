"""Flink's classic extractors, with the seeds' exact formulas.

* ``BoundedOutOfOrdernessTimestampExtractor``: ``max_ts - B`` (no ``- 1``), never regressing,
  a negative ``B`` rejected ("This parameter cannot be negative").
* ``AscendingTimestampExtractor``: ``current_ts - 1``, ``MIN`` before data; a timestamp that
  goes backwards goes to a ``MonotonyViolationHandler`` (ignore, fail, log; log by default).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lowwater.core.errors import ConfigurationError, MonotonyViolationError
from lowwater.core.time import MIN_TIMESTAMP
from lowwater.core.watermarks import (
    AscendingTimestampExtractor,
    AssignerWithPeriodicWatermarks,
    AssignerWithPunctuatedWatermarks,
    BoundedOutOfOrdernessTimestampExtractor,
    FailingHandler,
    IgnoringHandler,
    LoggingHandler,
    RecordingOutput,
    Watermark,
    WatermarkGeneratorContext,
    WatermarkStrategy,
    legacy_watermarks,
    monotony_violation_handler,
)


def _ts(e: dict[str, Any]) -> int:
    return int(e["ts"])


def _wm(assigner: Any) -> int:
    wm = assigner.get_current_watermark()
    return wm.timestamp if isinstance(wm, Watermark) else int(wm)


# -- BoundedOutOfOrdernessTimestampExtractor ---------------------------------------------------
def test_legacy_bounded_is_min_before_data() -> None:
    assert _wm(BoundedOutOfOrdernessTimestampExtractor(1_000, _ts)) == MIN_TIMESTAMP


def test_legacy_bounded_is_max_timestamp_minus_bound_without_minus_one() -> None:
    ex = BoundedOutOfOrdernessTimestampExtractor(1_000, _ts)
    assert ex.extract_timestamp({"ts": 5_000}, MIN_TIMESTAMP) == 5_000
    assert _wm(ex) == 4_000
    ex.extract_timestamp({"ts": 3_000}, MIN_TIMESTAMP)
    assert _wm(ex) == 4_000
    ex.extract_timestamp({"ts": 9_000}, MIN_TIMESTAMP)
    assert _wm(ex) == 8_000


@given(st.integers(0, 10_000), st.lists(st.integers(-(10**6), 10**6), min_size=1, max_size=30))
def test_legacy_bounded_watermark_never_regresses_and_tracks_the_maximum(
    bound: int, timestamps: list[int]
) -> None:
    ex = BoundedOutOfOrdernessTimestampExtractor(bound, _ts)
    last = MIN_TIMESTAMP
    for i, ts in enumerate(timestamps):
        ex.extract_timestamp({"ts": ts}, MIN_TIMESTAMP)
        wm = _wm(ex)
        assert wm >= last
        assert wm == max(timestamps[: i + 1]) - bound
        last = wm


def test_legacy_bounded_rejects_a_negative_bound_naming_the_parameter() -> None:
    with pytest.raises(ConfigurationError) as e:
        BoundedOutOfOrdernessTimestampExtractor(-1, _ts)
    assert e.value.parameter == "max_out_of_orderness"
    assert "cannot be negative" in str(e.value)


def test_legacy_bounded_through_a_strategy_shares_state_between_assigner_and_generator() -> None:
    strategy = WatermarkStrategy.for_legacy(BoundedOutOfOrdernessTimestampExtractor(500, _ts))
    part = strategy.create_partition(WatermarkGeneratorContext())
    out = RecordingOutput()
    ts = part.assigner.extract_timestamp({"ts": 2_000}, MIN_TIMESTAMP)
    part.generator.on_event({"ts": 2_000}, ts, out)
    part.generator.on_periodic_emit(out)
    assert out.watermarks == [1_500]


def test_legacy_strategy_gives_each_partition_its_own_copy() -> None:
    strategy = WatermarkStrategy.for_legacy(BoundedOutOfOrdernessTimestampExtractor(0, _ts))
    p0 = strategy.create_partition(WatermarkGeneratorContext(partition=0))
    p1 = strategy.create_partition(WatermarkGeneratorContext(partition=1))
    p0.assigner.extract_timestamp({"ts": 9_000}, MIN_TIMESTAMP)
    out0, out1 = RecordingOutput(), RecordingOutput()
    p0.generator.on_periodic_emit(out0)
    p1.generator.on_periodic_emit(out1)
    assert out0.watermarks == [9_000]
    assert out1.watermarks == [MIN_TIMESTAMP]


# -- AscendingTimestampExtractor ---------------------------------------------------------------
def test_ascending_is_min_before_data_and_current_minus_one_after() -> None:
    ex = AscendingTimestampExtractor(_ts)
    assert _wm(ex) == MIN_TIMESTAMP
    ex.extract_timestamp({"ts": 5_000}, MIN_TIMESTAMP)
    assert _wm(ex) == 4_999
    ex.extract_timestamp({"ts": 5_000}, MIN_TIMESTAMP)  # equal is not a violation
    assert _wm(ex) == 4_999
    ex.extract_timestamp({"ts": 6_000}, MIN_TIMESTAMP)
    assert _wm(ex) == 5_999


def test_ascending_ignoring_handler_keeps_the_element_timestamp_and_the_watermark() -> None:
    ex = AscendingTimestampExtractor(_ts, IgnoringHandler())
    ex.extract_timestamp({"ts": 5_000}, MIN_TIMESTAMP)
    assert ex.extract_timestamp({"ts": 3_000}, MIN_TIMESTAMP) == 3_000
    assert _wm(ex) == 4_999


def test_ascending_failing_handler_raises_with_both_timestamps() -> None:
    ex = AscendingTimestampExtractor(_ts, FailingHandler())
    ex.extract_timestamp({"ts": 5_000}, MIN_TIMESTAMP)
    with pytest.raises(MonotonyViolationError) as e:
        ex.extract_timestamp({"ts": 3_000}, MIN_TIMESTAMP)
    assert "3000" in str(e.value)
    assert "5000" in str(e.value)
    assert (e.value.element_timestamp, e.value.last_timestamp) == (3_000, 5_000)


def test_ascending_logging_handler_logs_a_warning_with_both_timestamps(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handler = LoggingHandler()
    ex = AscendingTimestampExtractor(_ts, handler)
    ex.extract_timestamp({"ts": 5_000}, MIN_TIMESTAMP)
    with caplog.at_level(logging.WARNING):
        assert ex.extract_timestamp({"ts": 3_000}, MIN_TIMESTAMP) == 3_000
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "3000" in warnings[0].getMessage()
    assert "5000" in warnings[0].getMessage()
    assert _wm(ex) == 4_999


def test_ascending_logs_by_default(caplog: pytest.LogCaptureFixture) -> None:
    ex = AscendingTimestampExtractor(_ts)
    assert isinstance(ex.violation_handler, LoggingHandler)
    ex.extract_timestamp({"ts": 2}, MIN_TIMESTAMP)
    with caplog.at_level(logging.WARNING):
        ex.extract_timestamp({"ts": 1}, MIN_TIMESTAMP)
    assert any("1" in r.getMessage() and "2" in r.getMessage() for r in caplog.records)


def test_ascending_without_extract_asks_for_one() -> None:
    with pytest.raises(NotImplementedError, match="extract"):
        AscendingTimestampExtractor().extract_timestamp({"ts": 1}, MIN_TIMESTAMP)


def test_ascending_subclass_may_override_extract_ascending_timestamp() -> None:
    class ByField(AscendingTimestampExtractor[dict[str, int]]):
        def extract_ascending_timestamp(self, element: dict[str, int]) -> int:
            return element["t"]

    ex = ByField()
    ex.extract_timestamp({"t": 100}, MIN_TIMESTAMP)
    assert _wm(ex) == 99


@pytest.mark.parametrize(
    ("name", "cls"),
    [("ignore", IgnoringHandler), ("fail", FailingHandler), ("log", LoggingHandler)],
)
def test_violation_handlers_by_name(name: str, cls: type) -> None:
    assert isinstance(monotony_violation_handler(name), cls)


def test_an_unknown_violation_handler_is_rejected_naming_the_parameter() -> None:
    with pytest.raises(ConfigurationError) as e:
        monotony_violation_handler("panic")
    assert e.value.parameter == "violation_handler"


# -- the classic interfaces --------------------------------------------------------------------
def test_a_punctuated_assigner_emits_through_its_generator_view() -> None:
    class EveryTenth(AssignerWithPunctuatedWatermarks[int]):
        def extract_timestamp(self, element: int, previous_element_timestamp: int) -> int:
            return element

        def check_and_get_next_watermark(
            self, last_element: int, extracted_timestamp: int
        ) -> int | None:
            return extracted_timestamp if extracted_timestamp % 10 == 0 else None

    gen = legacy_watermarks(EveryTenth())
    out = RecordingOutput()
    for ts in (3, 10, 15, 20):
        gen.on_event(ts, ts, out)
    gen.on_periodic_emit(out)
    assert out.watermarks == [10, 20]


def test_a_periodic_assigner_returning_none_emits_nothing() -> None:
    class Silent(AssignerWithPeriodicWatermarks[int]):
        def extract_timestamp(self, element: int, previous_element_timestamp: int) -> int:
            return element

        def get_current_watermark(self) -> None:
            return None

    out = RecordingOutput()
    legacy_watermarks(Silent()).on_periodic_emit(out)
    assert out.events == []


def test_legacy_watermarks_rejects_something_that_is_not_an_assigner() -> None:
    with pytest.raises(ConfigurationError) as e:
        legacy_watermarks(object())  # type: ignore[arg-type]
    assert e.value.parameter == "assigner"
