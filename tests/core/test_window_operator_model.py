"""The window operator equals a brute-force model of Flink's rules, element by element.

The model is written from DESIGN §1 and Flink's ``WindowOperator`` + ``EventTimeTrigger``
for tumbling and sliding windows and in-order processing, independently of the code:

* a window is late iff ``max_ts + lateness <= watermark``; an element late for all its
  windows goes to the late output;
* otherwise it joins each window that is not late, and if ``max_ts <= watermark`` that
  window fires at once with its full contents (a late-but-allowed re-fire);
* a watermark fires every window whose ``max_ts`` it reaches and that has not yet been
  fired by a watermark, then drops windows whose ``max_ts + lateness`` it reaches;
* ``fire_index`` counts the firings of a (key, window): 0, 1, 2...
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.windows import (
    AggregateFunction,
    AggregatingContents,
    LateElement,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WindowFired,
    WindowOperator,
)


class Collect(AggregateFunction[int, tuple[int, ...], tuple[int, ...]]):
    """The window's elements in arrival order: the strongest possible "full contents"."""

    def create_accumulator(self) -> tuple[int, ...]:
        return ()

    def add(self, value: int, accumulator: tuple[int, ...]) -> tuple[int, ...]:
        return (*accumulator, value)

    def get_result(self, accumulator: tuple[int, ...]) -> tuple[int, ...]:
        return accumulator

    def merge(self, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
        return a + b


@dataclass
class Model:
    """Windows are ``(key, start)``; starts are aligned to ``offset`` modulo ``slide``."""

    size: int
    slide: int
    offset: int
    lateness: int
    wm: int = MIN_TIMESTAMP
    contents: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    fires: dict[tuple[str, int], int] = field(default_factory=dict)
    waiting: set[tuple[str, int]] = field(default_factory=set)  # to be fired by a watermark
    results: list[tuple[str, int, int, tuple[int, ...], int]] = field(default_factory=list)
    late: list[tuple[str, int, int]] = field(default_factory=list)

    def _starts(self, ts: int) -> list[int]:
        return [s for s in range(ts - self.size + 1, ts + 1) if (s - self.offset) % self.slide == 0]

    def _fire(self, w: tuple[str, int]) -> None:
        index = self.fires.get(w, 0)
        self.fires[w] = index + 1
        key, start = w
        self.results.append((key, start, start + self.size, tuple(self.contents[w]), index))

    def element(self, key: str, ts: int, value: int) -> None:
        open_starts = [s for s in self._starts(ts) if s + self.size - 1 + self.lateness > self.wm]
        if not open_starts:
            self.late.append((key, ts, value))
            return
        for start in open_starts:
            w = (key, start)
            self.contents.setdefault(w, []).append(value)
            if start + self.size - 1 <= self.wm:
                self._fire(w)
            else:
                self.waiting.add(w)

    def watermark(self, wm: int) -> None:
        if wm <= self.wm:
            return
        self.wm = wm
        for w in sorted(self.waiting, key=lambda w: w[1]):
            if w[1] + self.size - 1 <= wm:
                self._fire(w)
                self.waiting.discard(w)
        for w in list(self.contents):
            if w[1] + self.size - 1 + self.lateness <= wm:
                del self.contents[w]
                self.fires.pop(w, None)


@dataclass(frozen=True)
class Element:
    key: str
    ts: int


@dataclass(frozen=True)
class Advance:
    to: int


steps = st.lists(
    st.one_of(
        st.builds(Element, st.sampled_from(["a", "b"]), st.integers(-50, 150)),
        st.builds(Advance, st.integers(-60, 160)),
    ),
    max_size=50,
)


@st.composite
def window_shapes(draw: st.DrawFn) -> tuple[int, int, int]:
    """(size, slide, offset): tumbling when slide == size, else sliding."""
    size = draw(st.integers(1, 40))
    slide = draw(st.one_of(st.just(size), st.integers(1, size)))
    offset = draw(st.integers(-(slide - 1), slide - 1))
    return size, slide, offset


@settings(max_examples=300)
@given(window_shapes(), st.integers(0, 40), steps)
def test_window_operator_matches_a_brute_force_model_of_flinks_rules(
    shape: tuple[int, int, int], lateness: int, script: list[Element | Advance]
) -> None:
    size, slide, offset = shape
    assigner = (
        TumblingEventTimeWindows(size, offset)
        if slide == size
        else SlidingEventTimeWindows(size, slide, offset)
    )
    op = WindowOperator(assigner, AggregatingContents(Collect()), allowed_lateness_ms=lateness)
    model = Model(size, slide, offset, lateness)
    got_results: list[tuple[Any, ...]] = []
    got_late: list[tuple[Any, ...]] = []

    def take(events: list[Any]) -> None:
        for e in events:
            if isinstance(e, WindowFired):
                for r in e.outputs:
                    got_results.append((r.key, r.window_start, r.window_end, r.value, r.fire_index))
            elif isinstance(e, LateElement):
                got_late.append((e.key, e.timestamp, e.element))

    for i, step in enumerate([*script, Advance(MAX_TIMESTAMP)]):
        if isinstance(step, Element):
            take(op.process_element(step.key, i, step.ts))
            model.element(step.key, step.ts, i)
        else:
            take(op.advance_watermark(step.to))
            model.watermark(step.to)

    assert Counter(got_results) == Counter(model.results)
    assert got_late == model.late
    assert op.late_count == len(model.late)
    assert op.open_windows() == 0
    assert op.state_size() == 0
    # fire indexes of each window come out in order 0, 1, 2...
    per_window: dict[tuple[Any, ...], list[int]] = {}
    for key, start, end, _, index in got_results:
        per_window.setdefault((key, start, end), []).append(index)
    assert all(v == list(range(len(v))) for v in per_window.values())
