"""Event-time session windows equal a brute-force model of Flink's merging rules.

Written from ``EventTimeSessionWindows``, ``MergingWindowSet`` and ``WindowOperator``
(in-order processing, ``EventTimeTrigger``), independently of the implementation:

* an element opens ``[ts, ts + gap)``; every open session of its key that overlaps or
  touches it merges into one session with the covering bounds;
* an element that merges with nothing and whose own session is late
  (``end - 1 + lateness <= watermark``) is a late element;
* a session whose ``end - 1 <= watermark`` after the element joined fires at once with its
  full contents; otherwise a watermark fires it when it reaches ``end - 1``;
* a session is dropped once the watermark reaches ``end - 1 + lateness``;
* ``fire_index`` counts the firings of a session with the same bounds.

Contents are compared as multisets: the order of merged state is not specified.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.windows import (
    EventTimeSessionWindows,
    LateElement,
    ListContents,
    WindowFired,
    WindowOperator,
)


@dataclass
class Session:
    start: int
    end: int
    contents: list[int]
    waiting: bool = False
    fires: int = 0


@dataclass
class SessionModel:
    gap: int
    lateness: int
    wm: int = MIN_TIMESTAMP
    sessions: dict[str, list[Session]] = field(default_factory=dict)
    results: list[tuple[str, int, int, tuple[int, ...], int]] = field(default_factory=list)
    late: list[tuple[str, int, int]] = field(default_factory=list)

    def _fire(self, key: str, s: Session) -> None:
        self.results.append((key, s.start, s.end, tuple(sorted(s.contents)), s.fires))
        s.fires += 1

    def element(self, key: str, ts: int, value: int) -> None:
        start, end = ts, ts + self.gap
        mine = self.sessions.setdefault(key, [])
        touching = [s for s in mine if s.start <= end and s.end >= start]
        if not touching and end - 1 + self.lateness <= self.wm:
            self.late.append((key, ts, value))
            return
        if len(touching) == 1 and touching[0].start <= start and touching[0].end >= end:
            session = touching[0]  # inside an existing session: nothing merges
        else:
            session = Session(
                min([start, *(s.start for s in touching)]),
                max([end, *(s.end for s in touching)]),
                [c for s in touching for c in s.contents],
            )
            for s in touching:
                mine.remove(s)
            mine.append(session)
        session.contents.append(value)
        if session.end - 1 <= self.wm:
            self._fire(key, session)
        else:
            session.waiting = True

    def watermark(self, wm: int) -> None:
        if wm <= self.wm:
            return
        self.wm = wm
        for key, mine in self.sessions.items():
            for s in sorted(mine, key=lambda s: s.end):
                if s.waiting and s.end - 1 <= wm:
                    s.waiting = False
                    self._fire(key, s)
            mine[:] = [s for s in mine if s.end - 1 + self.lateness > wm]


@dataclass(frozen=True)
class Element:
    key: str
    ts: int


@dataclass(frozen=True)
class Advance:
    to: int


steps = st.lists(
    st.one_of(
        st.builds(Element, st.sampled_from(["a", "b"]), st.integers(0, 200)),
        st.builds(Advance, st.integers(0, 220)),
    ),
    max_size=50,
)


@settings(max_examples=300)
@given(st.integers(1, 40), st.integers(0, 60), steps)
def test_session_windows_match_a_brute_force_model_of_flinks_merging(
    gap: int, lateness: int, script: list[Element | Advance]
) -> None:
    op = WindowOperator(EventTimeSessionWindows(gap), ListContents(), allowed_lateness_ms=lateness)
    model = SessionModel(gap, lateness)
    got_results: list[tuple[Any, ...]] = []
    got_late: list[tuple[Any, ...]] = []

    def take(events: list[Any]) -> None:
        for e in events:
            if isinstance(e, WindowFired):
                for r in e.outputs:
                    value = r.value if isinstance(r.value, list) else [r.value]
                    got_results.append(
                        (r.key, r.window_start, r.window_end, tuple(sorted(value)), r.fire_index)
                    )
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
    assert op.open_windows() == 0
    assert op.state_size() == 0
