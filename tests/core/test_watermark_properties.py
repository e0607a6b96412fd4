"""Invariants of per-partition watermark combining, checked on arbitrary histories.

The model is DESIGN §1 restated: each partition keeps the maximum it was given (``MIN``
at first) and an idle flag that ``emit`` clears; a combine emits ``min`` over the
non-idle partitions when it is above everything emitted so far, and nothing otherwise;
when every partition is idle it is the maximum over all of them (Flink 2.3), and the
stream is then marked idle.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from lowwater.core.clock import ManualClock
from lowwater.core.time import MIN_TIMESTAMP
from lowwater.core.watermarks import (
    BoundedOutOfOrdernessWatermarks,
    RecordingOutput,
    Watermark,
    WatermarkEvent,
    WatermarkOutputMultiplexer,
    WatermarksWithIdleness,
)

IDLE = WatermarkEvent.idle()
ACTIVE = WatermarkEvent.active()
watermark = WatermarkEvent.watermark

PARTITIONS = 4


@dataclass(frozen=True)
class Emit:
    partition: int
    watermark: int


@dataclass(frozen=True)
class Idle:
    partition: int


@dataclass(frozen=True)
class Combine:
    pass


op = st.one_of(
    st.builds(Emit, st.integers(0, PARTITIONS - 1), st.integers(-1_000, 1_000)),
    st.builds(Idle, st.integers(0, PARTITIONS - 1)),
    st.just(Combine()),
)
histories = st.tuples(st.integers(1, PARTITIONS), st.lists(op, max_size=60))


def _run(n: int, ops: list[Emit | Idle | Combine]) -> tuple[list[int], list[int | None]]:
    """Feed the multiplexer; return what it emitted and what the model expects per combine."""
    under = RecordingOutput()
    mux = WatermarkOutputMultiplexer(under)
    for p in range(n):
        mux.register_new_output(p)
    model_wm = [MIN_TIMESTAMP] * n
    model_idle = [False] * n
    last = MIN_TIMESTAMP
    expected: list[int | None] = []
    for o in ops:
        if isinstance(o, Emit) and o.partition < n:
            mux.get_deferred_output(o.partition).emit_watermark(Watermark(o.watermark))
            model_wm[o.partition] = max(model_wm[o.partition], o.watermark)
            model_idle[o.partition] = False
        elif isinstance(o, Idle) and o.partition < n:
            mux.get_deferred_output(o.partition).mark_idle()
            model_idle[o.partition] = True
        elif isinstance(o, Combine):
            active = [w for w, idle in zip(model_wm, model_idle, strict=True) if not idle]
            candidate = min(active) if active else max(model_wm)
            if candidate > last:
                last = candidate
                expected.append(last)
            mux.on_periodic_emit()
    return under.watermarks, [e for e in expected if e is not None]


@given(histories)
def test_combined_watermark_never_regresses_under_arbitrary_emits_and_idles(
    history: tuple[int, list[Emit | Idle | Combine]],
) -> None:
    emitted, _ = _run(*history)
    assert all(a < b for a, b in pairwise(emitted))


@given(histories)
def test_combined_watermark_is_the_minimum_over_non_idle_partitions(
    history: tuple[int, list[Emit | Idle | Combine]],
) -> None:
    emitted, expected = _run(*history)
    assert emitted == expected


@given(histories)
def test_a_partitions_own_watermark_is_the_maximum_it_was_ever_given(
    history: tuple[int, list[Emit | Idle | Combine]],
) -> None:
    n, ops = history
    mux = WatermarkOutputMultiplexer(RecordingOutput())
    for p in range(n):
        mux.register_new_output(p)
    best = [MIN_TIMESTAMP] * n
    for o in ops:
        if isinstance(o, Emit) and o.partition < n:
            mux.get_deferred_output(o.partition).emit_watermark(Watermark(o.watermark))
            best[o.partition] = max(best[o.partition], o.watermark)
            assert mux.partial(o.partition).watermark == best[o.partition]


@given(
    st.lists(st.integers(-1_000, 1_000), min_size=2, max_size=PARTITIONS),
    st.integers(0, PARTITIONS - 1),
)
def test_an_idle_partition_does_not_hold_the_watermark_back(
    watermarks: list[int], lagging: int
) -> None:
    lagging %= len(watermarks)
    under = RecordingOutput()
    mux = WatermarkOutputMultiplexer(under)
    for p, wm in enumerate(watermarks):
        mux.register_new_output(p)
        mux.get_deferred_output(p).emit_watermark(Watermark(wm))
    mux.get_deferred_output(lagging).mark_idle()
    mux.on_periodic_emit()
    others = [w for p, w in enumerate(watermarks) if p != lagging]
    assert mux.combined_watermark == min(others)
    assert under.watermarks == [min(others)]


@given(st.lists(st.integers(-1_000, 1_000), min_size=1, max_size=PARTITIONS), st.integers(1, 5))
def test_when_every_partition_is_idle_the_combined_watermark_is_the_maximum_over_all_partitions(
    watermarks: list[int], combines: int
) -> None:
    under = RecordingOutput()
    mux = WatermarkOutputMultiplexer(under)
    for p, wm in enumerate(watermarks):
        mux.register_new_output(p)
        mux.get_deferred_output(p).emit_watermark(Watermark(wm))
        mux.get_deferred_output(p).mark_idle()
    for _ in range(combines):
        mux.on_periodic_emit()
    assert under.watermarks == [max(watermarks)]
    assert under.events == [watermark(max(watermarks)), IDLE]
    assert under.idle is True


@given(st.lists(st.integers(-1_000, 1_000), min_size=2, max_size=PARTITIONS), st.permutations(range(PARTITIONS)))
def test_the_order_in_which_partitions_go_idle_does_not_change_the_all_idle_watermark(
    watermarks: list[int], order: list[int]
) -> None:
    """Each partition goes idle at its own combine; the last combine still ends at the maximum."""
    under = RecordingOutput()
    mux = WatermarkOutputMultiplexer(under)
    for p, wm in enumerate(watermarks):
        mux.register_new_output(p)
        mux.get_deferred_output(p).emit_watermark(Watermark(wm))
    mux.on_periodic_emit()
    for p in (q for q in order if q < len(watermarks)):
        mux.get_deferred_output(p).mark_idle()
        mux.on_periodic_emit()
    assert mux.combined_watermark == max(watermarks)
    assert under.watermarks[-1] == max(watermarks)
    assert under.events[-1] == IDLE


@given(st.lists(st.integers(-1_000, 1_000), min_size=2, max_size=PARTITIONS), st.integers(-2_000, 2_000))
def test_a_partition_that_returns_after_all_were_idle_never_lowers_the_combined_watermark(
    watermarks: list[int], returning: int
) -> None:
    under = RecordingOutput()
    mux = WatermarkOutputMultiplexer(under)
    for p, wm in enumerate(watermarks):
        mux.register_new_output(p)
        mux.get_deferred_output(p).emit_watermark(Watermark(wm))
        mux.get_deferred_output(p).mark_idle()
    mux.on_periodic_emit()
    mux.get_deferred_output(0).emit_watermark(Watermark(returning))
    mux.on_periodic_emit()
    top = max(watermarks)
    assert mux.combined_watermark == max(top, returning)
    assert under.watermarks == ([top] if returning <= top else [top, returning])
    assert under.idle is False
    assert ACTIVE in under.events[2:]


@settings(max_examples=50)
@given(
    st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 10_000), st.integers(0, 3_000)),
        max_size=40,
    )
)
def test_combined_watermark_never_regresses_when_a_partition_goes_idle(
    steps: list[tuple[int, int, int]],
) -> None:
    """Two partitions with bounded generators and idleness; random data and clock steps."""
    clock = ManualClock(0)
    under = RecordingOutput()
    mux = WatermarkOutputMultiplexer(under)
    gens = []
    for p in range(2):
        mux.register_new_output(p)
        gens.append(WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(100), 1_000, clock))
    for partition, ts, dt in steps:
        gens[partition].on_event("x", ts, mux.get_deferred_output(partition))
        clock.advance(dt)
        for p, g in enumerate(gens):
            g.on_periodic_emit(mux.get_deferred_output(p))
        mux.on_periodic_emit()
    assert all(a < b for a, b in pairwise(under.watermarks))
