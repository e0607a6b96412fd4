"""The input valve of a union (Flink's ``StatusWatermarkValve``), channel by channel.

Timelines: ``c0``/``c1`` are the united sources; the output is what the consumer sees.
"""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from lowwater.core.time import MIN_TIMESTAMP
from lowwater.core.watermarks import RecordingOutput, StatusWatermarkValve, WatermarkEvent

IDLE = WatermarkEvent.idle()
ACTIVE = WatermarkEvent.active()
watermark = WatermarkEvent.watermark


def _valve(n: int = 2) -> tuple[StatusWatermarkValve, RecordingOutput]:
    return StatusWatermarkValve(n), RecordingOutput()


def test_there_is_no_output_watermark_until_every_channel_has_one() -> None:
    v, out = _valve()
    v.input_watermark(0, 10, out)
    assert out.watermarks == []
    v.input_watermark(1, 4, out)
    assert out.watermarks == [4]


def test_the_output_is_the_minimum_over_the_channels_and_only_advances() -> None:
    v, out = _valve()
    v.input_watermark(0, 10, out)
    v.input_watermark(1, 4, out)
    v.input_watermark(1, 12, out)
    v.input_watermark(0, 8, out)  # below c0's own watermark: ignored
    assert out.watermarks == [4, 10]
    assert v.last_output_watermark == 10


def test_an_idle_channel_does_not_hold_the_output_back() -> None:
    #  c0: 10 .......... 20
    #  c1: 4  IDLE
    #  out: 4  10        20
    v, out = _valve()
    v.input_watermark(0, 10, out)
    v.input_watermark(1, 4, out)
    v.input_idle(1, out)
    v.input_watermark(0, 20, out)
    assert out.watermarks == [4, 10, 20]


def test_a_returning_channel_does_not_hold_the_output_back_until_it_catches_up() -> None:
    #  c0: 10 ...... 30 ........... 40
    #  c1: 4 IDLE  ACTIVE 25      35
    #  out: 4  10    30 (c1 unaligned)  35 (c1 aligned at 35 >= 30)
    v, out = _valve()
    v.input_watermark(0, 10, out)
    v.input_watermark(1, 4, out)
    v.input_idle(1, out)
    v.input_watermark(0, 30, out)
    v.input_active(1, out)
    v.input_watermark(1, 25, out)  # behind the output: does not count
    v.input_watermark(0, 40, out)
    assert out.watermarks == [4, 10, 30, 40]
    v2, out2 = _valve()
    v2.input_watermark(0, 10, out2)
    v2.input_watermark(1, 4, out2)
    v2.input_idle(1, out2)
    v2.input_watermark(0, 30, out2)
    v2.input_active(1, out2)
    v2.input_watermark(1, 35, out2)  # caught up: it counts again
    v2.input_watermark(0, 40, out2)
    assert out2.watermarks == [4, 10, 30, 35]


def test_a_watermark_on_an_idle_channel_is_ignored() -> None:
    v, out = _valve()
    v.input_watermark(0, 10, out)
    v.input_watermark(1, 10, out)
    v.input_idle(1, out)
    v.input_watermark(1, 50, out)
    assert v.channels[1].watermark == 10
    assert out.watermarks == [10]


def test_when_the_last_channel_to_go_idle_held_the_output_the_maximum_is_flushed() -> None:
    v, out = _valve()
    v.input_watermark(0, 30, out)
    v.input_watermark(1, 10, out)
    v.input_idle(0, out)  # c0 did not hold the output (10): nothing
    v.input_idle(1, out)  # c1 held it: flush max(30, 10)
    assert out.events == [watermark(10), watermark(30), IDLE]


def test_when_the_last_channel_to_go_idle_did_not_hold_the_output_nothing_is_flushed() -> None:
    v, out = _valve()
    v.input_watermark(0, 30, out)
    v.input_watermark(1, 10, out)
    v.input_idle(1, out)  # releases the output to 30
    v.input_idle(0, out)  # c0 holds 30 == output: max is 30, no advance
    assert out.events == [watermark(10), watermark(30), IDLE]
    v3, out3 = _valve(3)
    v3.input_watermark(0, 30, out3)
    v3.input_watermark(1, 10, out3)
    v3.input_watermark(2, 20, out3)
    v3.input_idle(1, out3)     # -> 20
    v3.input_active(1, out3)   # c1 back at 10 (< 20): unaligned
    v3.input_idle(2, out3)     # -> 30 (only c0 aligned)
    v3.input_idle(0, out3)     # c0 held 30: max stays 30
    v3.input_idle(1, out3)     # last idle is c1 at 10 != 30: no flush
    assert out3.watermarks == [10, 20, 30]
    assert out3.idle is True


def test_the_valve_becomes_active_when_a_channel_does() -> None:
    v, out = _valve(1)
    v.input_watermark(0, 5, out)
    v.input_idle(0, out)
    v.input_active(0, out)
    assert out.events == [watermark(5), IDLE, ACTIVE]
    assert v.last_output_watermark == 5 and v.idle is False


op = st.one_of(
    st.tuples(st.just("wm"), st.integers(0, 2), st.integers(-100, 100)),
    st.tuples(st.just("idle"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("active"), st.integers(0, 2), st.just(0)),
)


@given(st.lists(op, max_size=60))
def test_the_valve_output_never_regresses_whatever_the_channels_do(ops: list[tuple[str, int, int]]) -> None:
    v, out = _valve(3)
    for kind, ch, wm in ops:
        if kind == "wm":
            v.input_watermark(ch, wm, out)
        elif kind == "idle":
            v.input_idle(ch, out)
        else:
            v.input_active(ch, out)
    assert all(a < b for a, b in pairwise(out.watermarks))
    assert all(w > MIN_TIMESTAMP for w in out.watermarks)


@given(st.lists(op, max_size=60))
def test_the_valve_output_is_never_above_an_aligned_active_channel(ops: list[tuple[str, int, int]]) -> None:
    v, out = _valve(3)
    for kind, ch, wm in ops:
        getattr(v, {"wm": "input_watermark", "idle": "input_idle", "active": "input_active"}[kind])(
            *((ch, wm, out) if kind == "wm" else (ch, out)))
        if not v.idle:
            aligned = [c.watermark for c in v.channels if c.aligned]
            assert all(v.last_output_watermark <= w for w in aligned)


def test_the_union_keeps_its_watermark_below_the_maximum_when_the_last_channel_to_go_idle_did_not_hold_it() -> None:
    """Flink 2.3's quirk: a returning, unaligned channel goes idle last; nothing is flushed."""
    v, out = _valve(3)
    v.input_watermark(0, 20, out)
    v.input_watermark(1, 4, out)
    v.input_watermark(2, 10, out)  # -> 4
    v.input_idle(1, out)           # c1 held 4: -> 10
    v.input_active(1, out)         # c1 back at 4 < 10: unaligned
    v.input_idle(0, out)
    v.input_idle(2, out)           # c2 held 10, but no aligned channel is left
    v.input_idle(1, out)           # all idle; c1 (4) did not hold 10: no flush to 20
    assert out.watermarks == [4, 10]
    assert v.idle is True
