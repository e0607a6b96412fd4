"""The native path's panes of sliding windows (``gcd(size, slide)`` long), pure arithmetic against
the reference runtime's window assigner: which windows hold a pane, which panes make a window, and
which windows over some panes fire in a range. No Spark session: the SQL over them is checked on
Spark against the reference runtime (``tests/spark/test_engine.py``, the sliding scenarios)."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

pytest.importorskip("pyspark")

from lowwater.core.windows.sliding import sliding_windows
from lowwater.spark.native import PANES_PER_SLIDE, NativeProcessor
from lowwater.spark.plan import NativePlan

# (size, slide, offset): multiples, and sizes that are not (panes shorter than the slide)
SHAPES = [(6_000, 2_000, 0), (6_000, 2_000, 300), (2_500, 1_000, 300), (60_000, 25_000, 0), (2_000, 1_500, -700),
          (4_500, 2_000, 100), (1_000, 3, 0), (3, 2, 1), (7, 5, -3), (10, 4, 13)]


def _processor(size: int, slide: int, offset: int) -> NativeProcessor:
    plan: Any = NativePlan(source=None, strategy=None, timestamp_field="ts", key_field="key",  # type: ignore[arg-type]
                           size_ms=size, slide_ms=slide, offset_ms=offset, allowed_lateness_ms=0, aggregate="sum",
                           value_field="v", sink_outputs=("result",), window_name="w", late_tag=None)
    processor = NativeProcessor(plan)
    processor.panes = processor._pane_able()
    assert processor.panes
    return processor


def _pane(ts: int, size: int, slide: int, offset: int) -> int:
    """The pane of ``ts`` as the batch's aggregation computes it: its last window's start, plus
    whole panes (``_exploded_sql``)."""
    last = ts - (ts - offset) % slide
    g = math.gcd(size, slide)
    return last + (ts - last) // g * g


@pytest.mark.parametrize(("size", "slide", "offset"), SHAPES)
def test_every_element_of_a_pane_is_in_the_panes_windows(size: int, slide: int, offset: int) -> None:
    processor = _processor(size, slide, offset)
    g = math.gcd(size, slide)
    for ts in range(-3 * size - 17, 3 * size + 17, max(1, g // 3)):
        pane = _pane(ts, size, slide, offset)
        assert pane <= ts < pane + g and (pane - offset) % g == 0
        windows = sorted(w.start for w in sliding_windows(ts, size, slide, offset))
        assert list(processor._windows_of(pane)) == windows, ts
        assert processor._last_window(pane) == windows[-1]
        for ws in windows:
            panes = processor._panes_of(ws)
            assert pane in panes and len(panes) == size // g and panes[-1] + g == ws + size


@pytest.mark.parametrize(("size", "slide", "offset"), SHAPES)
def test_the_windows_over_some_panes_in_a_range_are_counted_as_listing_them_would(size: int, slide: int,
                                                                                  offset: int) -> None:
    processor = _processor(size, slide, offset)
    g = math.gcd(size, slide)
    rnd = random.Random(size * 31 + slide)
    for _ in range(300):
        base = rnd.randrange(-4 * size, 4 * size)
        times = [base + rnd.randrange(0, 3 * size) for _ in range(rnd.randint(1, 6))]
        panes = sorted({_pane(ts, size, slide, offset) for ts in times})
        lo = base + rnd.randrange(-2 * size, 3 * size)
        hi = lo + rnd.randrange(0, 3 * size)
        windows = {ws for pane in panes for ws in processor._windows_of(pane) if lo < ws <= hi}
        read = [pane for pane in panes if any(lo < ws <= hi for ws in processor._windows_of(pane))]
        assert processor._windows_over(panes, lo, hi) == (len(windows), read), (panes, lo, hi, g)
        pairs = processor._pane_windows(panes, lo, hi)
        assert pairs is not None and len(pairs) <= processor.JOIN_PAIRS
        assert sorted(pairs) == sorted((pane, ws) for pane in panes for ws in processor._windows_of(pane)
                                       if lo < ws <= hi)
        assert {ws for _, ws in pairs} == windows


def test_a_slide_of_many_short_panes_keeps_exploding() -> None:
    def pane_able(size: int, slide: int) -> bool:
        plan: Any = NativePlan(source=None, strategy=None, timestamp_field="ts", key_field="key",  # type: ignore[arg-type]
                               size_ms=size, slide_ms=slide, offset_ms=0, allowed_lateness_ms=0, aggregate="sum",
                               value_field="v", sink_outputs=("result",), window_name="w", late_tag=None)
        return NativeProcessor(plan)._pane_able()

    assert pane_able(60_000, 10_000) and pane_able(10_000, 10)  # multiples: a pane a slide
    assert pane_able(60_000, 25_000)  # 5 s panes, 5 a slide
    assert pane_able(1_000 * PANES_PER_SLIDE + 1_000, 1_000 * PANES_PER_SLIDE)
    assert not pane_able(10_000, 9_999)  # 1 ms panes, 9,999 a slide
    assert not pane_able(10_000, 10_000) and not pane_able(10_000, 20_000)  # tumbling, and gaps


def test_a_firing_of_more_pairs_than_a_table_holds_takes_the_lambda() -> None:
    processor = _processor(10_000, 10, 0)  # a thousand panes a window
    panes = list(range(0, 50_000, 10))
    assert processor._pane_windows(panes, 0, 10_000) is None
    assert processor._pane_windows(panes[:3], 0, 10) == [(10, 10), (20, 10)]  # window 10 holds panes 10 and 20
