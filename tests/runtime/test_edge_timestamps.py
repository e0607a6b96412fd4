"""Valid timestamps at the ends of the 64-bit range (issue 10, item 1): the reference runtime
dead-letters them with the same reason as the native Spark paths, instead of keeping a window
whose end or cleanup time cannot be represented."""

from __future__ import annotations

import pytest

from lowwater.api import StreamExecutionEnvironment
from lowwater.api.sources import CollectionSource
from lowwater.core.errors import BadRecordError
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import SlidingEventTimeWindows, TumblingEventTimeWindows


@pytest.mark.parametrize(("ts", "assigner", "margin"), [
    (2**63 - 1, TumblingEventTimeWindows.of(10_000), 20_001),
    (2**63 - 1001, TumblingEventTimeWindows.of(10_000), 20_001),
    (-(2**63) + 1, TumblingEventTimeWindows.of(10_000), 20_001),
    (2**63 - 30_000, SlidingEventTimeWindows.of(20_000, 5_000), 25_001 + 5_000),
])
def test_a_timestamp_whose_window_cannot_be_represented_is_dead_lettered_with_its_reason(
    ts: int, assigner: object, margin: int
) -> None:
    rows = [{"k": "a", "ts": 1_000, "v": 1}, {"k": "a", "ts": ts, "v": 2}]
    env = StreamExecutionEnvironment()
    sink = (env.from_source(CollectionSource([rows]),
                            WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
            .key_by("k").window(assigner).allowed_lateness(5_000 if margin > 25_000 else 0).sum("v").collect())
    result = env.execute()
    assert [d["reason"] for d in result.dead_letters] == [BadRecordError.edge_timestamp(ts, margin)]
    assert {r.value for r in sink.results} == {1}, "the ordinary record is windowed"
    assert result.accounting().balanced


def test_a_timestamp_just_inside_the_margin_is_windowed() -> None:
    ts = 2**63 - 1 - 20_001
    env = StreamExecutionEnvironment()
    sink = (env.from_source(CollectionSource([[{"k": "a", "ts": ts, "v": 3}]]),
                            WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
            .key_by("k").window(TumblingEventTimeWindows.of(10_000)).sum("v").collect())
    result = env.execute()
    assert result.dead_letters == [] and [r.value for r in sink.results] == [3]
