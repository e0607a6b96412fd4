"""Window assigners: tumbling, sliding, session and global (Flink's assigners, DESIGN §1).

A window ``[start, end)`` has ``max_timestamp = end - 1``. Starts are aligned to
``offset`` modulo the slide, with a floor modulo so negative timestamps work.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lowwater.core.errors import ConfigurationError
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.windows import (
    EventTimeSessionWindows,
    GlobalWindow,
    GlobalWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    window_start_with_offset,
)


class FixedTime:
    def __init__(self, now: int) -> None:
        self.now = now

    def current_processing_time(self) -> int:
        return self.now


# -- TimeWindow --------------------------------------------------------------------------------
def test_max_timestamp_is_end_minus_one() -> None:
    assert TimeWindow(0, 10).max_timestamp() == 9
    assert GlobalWindow().max_timestamp() == MAX_TIMESTAMP


def test_windows_that_overlap_or_touch_intersect() -> None:
    assert TimeWindow(0, 5).intersects(TimeWindow(5, 9))
    assert TimeWindow(5, 9).intersects(TimeWindow(0, 5))
    assert TimeWindow(0, 5).intersects(TimeWindow(3, 4))
    assert not TimeWindow(0, 5).intersects(TimeWindow(6, 9))
    assert TimeWindow(0, 5).cover(TimeWindow(3, 9)) == TimeWindow(0, 9)


# -- tumbling ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ts", "offset", "expected"),
    [
        (0, 0, TimeWindow(0, 10)),
        (9, 0, TimeWindow(0, 10)),
        (10, 0, TimeWindow(10, 20)),
        (-1, 0, TimeWindow(-10, 0)),
        (-10, 0, TimeWindow(-10, 0)),
        (-11, 0, TimeWindow(-20, -10)),
        (2, 3, TimeWindow(-7, 3)),
        (3, 3, TimeWindow(3, 13)),
        (12, 3, TimeWindow(3, 13)),
        (13, -3, TimeWindow(7, 17)),
        (6, -3, TimeWindow(-3, 7)),
    ],
)
def test_tumbling_windows_with_offsets_and_negative_timestamps(
    ts: int, offset: int, expected: TimeWindow
) -> None:
    assert TumblingEventTimeWindows(10, offset).assign_windows(None, ts, None) == [expected]


def test_tumbling_accepts_durations() -> None:
    a = TumblingEventTimeWindows.of("1 h", "15 min")
    assert (a.size_ms, a.offset_ms) == (3_600_000, 900_000)


@pytest.mark.parametrize("size", [0, -10])
def test_tumbling_size_must_be_positive(size: int) -> None:
    with pytest.raises(ConfigurationError) as e:
        TumblingEventTimeWindows(size)
    assert e.value.parameter == "size"


def test_tumbling_offset_must_be_smaller_than_the_size() -> None:
    with pytest.raises(ConfigurationError) as e:
        TumblingEventTimeWindows(10, 10)
    assert e.value.parameter == "offset"


def test_an_event_time_window_needs_a_timestamp() -> None:
    with pytest.raises(ConfigurationError, match="assign_timestamps_and_watermarks"):
        TumblingEventTimeWindows(10).assign_windows(None, MIN_TIMESTAMP, None)
    with pytest.raises(ConfigurationError, match="assign_timestamps_and_watermarks"):
        SlidingEventTimeWindows(10, 5).assign_windows(None, MIN_TIMESTAMP, None)


def test_processing_time_tumbling_uses_the_clock_not_the_timestamp() -> None:
    a = TumblingProcessingTimeWindows(1_000)
    assert a.assign_windows(None, 5, FixedTime(2_500)) == [TimeWindow(2_000, 3_000)]
    assert a.is_event_time() is False


# -- sliding -----------------------------------------------------------------------------------
def test_sliding_windows_cover_a_timestamp_latest_first() -> None:
    windows = SlidingEventTimeWindows(10, 5).assign_windows(None, 7, None)
    assert windows == [TimeWindow(5, 15), TimeWindow(0, 10)]


def test_sliding_windows_with_offset_and_negative_timestamp() -> None:
    windows = SlidingEventTimeWindows(6, 2, 1).assign_windows(None, -4, None)
    assert windows == [TimeWindow(-5, 1), TimeWindow(-7, -1), TimeWindow(-9, -3)]


def test_sliding_with_slide_equal_to_size_is_tumbling() -> None:
    for ts in range(-25, 25):
        assert SlidingEventTimeWindows(10, 10, 3).assign_windows(
            None, ts, None
        ) == TumblingEventTimeWindows(10, 3).assign_windows(None, ts, None)


@pytest.mark.parametrize(
    ("size", "slide", "offset", "parameter"),
    [(0, 1, 0, "size"), (10, 0, 0, "slide"), (10, 11, 0, "slide"), (10, 5, 5, "offset")],
)
def test_bad_sliding_parameters_are_rejected_naming_the_parameter(
    size: int, slide: int, offset: int, parameter: str
) -> None:
    with pytest.raises(ConfigurationError) as e:
        SlidingEventTimeWindows(size, slide, offset)
    assert e.value.parameter == parameter
    with pytest.raises(ConfigurationError):
        SlidingEventTimeWindows.of(size, slide, offset)


def test_processing_time_sliding_uses_the_clock() -> None:
    a = SlidingProcessingTimeWindows(10, 5)
    assert a.assign_windows(None, 10**9, FixedTime(7)) == [TimeWindow(5, 15), TimeWindow(0, 10)]


# -- session and global ------------------------------------------------------------------------
def test_session_window_is_timestamp_plus_gap() -> None:
    assert EventTimeSessionWindows(300).assign_windows(None, 1_000, None) == [
        TimeWindow(1_000, 1_300)
    ]


@pytest.mark.parametrize("gap", [0, -1])
def test_session_gap_must_be_positive(gap: int) -> None:
    with pytest.raises(ConfigurationError) as e:
        EventTimeSessionWindows(gap)
    assert e.value.parameter == "gap"
    with pytest.raises(ConfigurationError):
        EventTimeSessionWindows.with_gap(gap)


def test_session_merge_reports_groups_of_overlapping_or_touching_windows() -> None:
    groups: list[tuple[set[TimeWindow], TimeWindow]] = []
    windows = [
        TimeWindow(0, 5),
        TimeWindow(5, 8),
        TimeWindow(20, 25),
        TimeWindow(30, 35),
        TimeWindow(33, 40),
    ]
    EventTimeSessionWindows(5).merge_windows(windows, lambda ws, r: groups.append((set(ws), r)))
    assert sorted(groups, key=lambda g: g[1].start) == [
        ({TimeWindow(0, 5), TimeWindow(5, 8)}, TimeWindow(0, 8)),
        ({TimeWindow(30, 35), TimeWindow(33, 40)}, TimeWindow(30, 40)),
    ]


def test_global_windows_put_everything_in_one_window() -> None:
    a = GlobalWindows.create()
    assert a.assign_windows("x", 1, None) == a.assign_windows("y", 10**9, None) == [GlobalWindow()]


# -- properties --------------------------------------------------------------------------------
timestamps = st.integers(-(10**12), 10**12)


@st.composite
def size_and_offset(draw: Any) -> tuple[int, int]:
    size = draw(st.integers(1, 10_000))
    offset = draw(st.integers(-(size - 1), size - 1))
    return size, offset


@given(timestamps, size_and_offset())
def test_tumbling_assigns_exactly_the_aligned_window_containing_the_timestamp(
    ts: int, so: tuple[int, int]
) -> None:
    size, offset = so
    [w] = TumblingEventTimeWindows(size, offset).assign_windows(None, ts, None)
    assert w.end - w.start == size
    assert w.start <= ts < w.end
    assert (w.start - offset) % size == 0  # aligned: start = N * size + offset


@given(timestamps, size_and_offset())
def test_window_start_is_ts_minus_floor_mod_of_ts_minus_offset(
    ts: int, so: tuple[int, int]
) -> None:
    size, offset = so
    start = window_start_with_offset(ts, offset, size)
    remainder = ts - start
    assert 0 <= remainder < size
    assert (ts - offset - remainder) % size == 0


@st.composite
def sliding_params(draw: Any) -> tuple[int, int, int]:
    slide = draw(st.integers(1, 200))
    size = draw(st.integers(slide, 800))
    offset = draw(st.integers(-(slide - 1), slide - 1))
    return size, slide, offset


@given(st.integers(-(10**9), 10**9), sliding_params())
def test_sliding_assigns_every_aligned_window_containing_the_timestamp_and_no_other(
    ts: int, params: tuple[int, int, int]
) -> None:
    size, slide, offset = params
    windows = SlidingEventTimeWindows(size, slide, offset).assign_windows(None, ts, None)
    brute = {
        TimeWindow(s, s + size) for s in range(ts - size + 1, ts + 1) if (s - offset) % slide == 0
    }
    assert set(windows) == brute
    assert len(windows) == len(brute)  # no duplicates
    assert all(w.end - w.start == size and w.start <= ts < w.end for w in windows)
    assert [w.start for w in windows] == sorted((w.start for w in windows), reverse=True)


@given(st.integers(-(10**9), 10**9), st.integers(1, 100), st.integers(1, 10), st.data())
def test_sliding_gives_exactly_size_over_slide_windows_when_slide_divides_size(
    ts: int, slide: int, factor: int, data: st.DataObject
) -> None:
    size = slide * factor
    offset = data.draw(st.integers(-(slide - 1), slide - 1))
    assert (
        len(SlidingEventTimeWindows(size, slide, offset).assign_windows(None, ts, None)) == factor
    )
