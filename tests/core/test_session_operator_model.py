"""The session operator does exactly what the generic window operator does for event-time
sessions with the event-time trigger: the same events in the same order, the same counters
and the same key slices, also when the state moves between them through key slices.

The generic :class:`WindowOperator` is the model. Both are driven with the same random
elements (several keys, timestamps late or not), watermarks (up to ``MAX_TIMESTAMP``),
allowed lateness, gap and contents, and at random points all state is taken out by key and
put back into fresh operators, their own or (crossed) each other's, as the Spark keyed path
does per batch. The order of windows and of equal-time timers inside one slice is that of a
dict or set, so slices are compared with those lists sorted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lowwater.core.clock import ManualClock
from lowwater.core.errors import BadRecordError, PipelineError
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.windows import (
    AggregateFunction,
    AggregatingContents,
    EventTimeSessionWindows,
    EventTimeTrigger,
    LateElement,
    ListContents,
    ProcessWindowFunction,
    ReducingContents,
    TimeWindow,
    WindowContents,
    WindowFired,
    WindowOperator,
    builtin_aggregate,
)
from lowwater.core.windows.key_slice import KeySlices
from lowwater.core.windows.session_operator import SessionWindowOperator, session_operator_for

POISON = 13
"""A value the contents refuse with a BadRecordError (a user function dead-lettering a record)."""


class _StrictSum(AggregateFunction[Any, Any, Any]):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: Any, accumulator: list[int]) -> list[int]:
        if value["value"] == POISON:
            raise BadRecordError("poison")
        accumulator[0] += value["value"]
        accumulator[1] += 1
        return accumulator

    def get_result(self, accumulator: list[int]) -> tuple[int, int]:
        return (accumulator[0], accumulator[1])

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]


def _concat(a: Any, b: Any) -> Any:
    """Order-sensitive, so a merge in another order shows."""
    if b == (POISON,):
        raise BadRecordError("poison")
    return a + b


CONTENTS: dict[str, tuple[Callable[[], WindowContents], Callable[[int], Any]]] = {
    "sum": (lambda: AggregatingContents(builtin_aggregate("sum", "value")), lambda v: {"value": v}),
    "strict_sum": (lambda: AggregatingContents(_StrictSum()), lambda v: {"value": v}),
    "concat": (lambda: ReducingContents(_concat), lambda v: (v,)),
    "list": (ListContents, lambda v: v),
}


@dataclass
class _Describe(ProcessWindowFunction[Any, Any]):
    """Emits what it sees, sends a side output, and logs the windows it is told to clear."""

    cleared: list[tuple[int, TimeWindow]] = field(default_factory=list)

    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
        items = list(elements)
        context.output("seen", (key, context.window))
        return [(key, context.window, repr(items), context.current_watermark(), context.current_processing_time())]

    def clear(self, context: Any) -> None:
        self.cleared.append((context.current_watermark(), context.window))


def _plain(key: Any, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
    return [(key, context.window.start, repr(list(elements)))]


@dataclass(frozen=True)
class Setup:
    gap_ms: int
    lateness_ms: int
    contents: str
    function: str  # "none", "process", "plain"
    explicit_trigger: bool


class Pair:
    """The model and the operator under test, driven in lockstep."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.clock = ManualClock(5)
        self.cleared_ref: list[Any] = []
        self.cleared_fast: list[Any] = []
        self.ref, self.fast = self._make_ref(), self._make_fast()

    def _function(self, log: list[Any]) -> Any:
        if self.setup.function == "process":
            return _Describe(log)
        return _plain if self.setup.function == "plain" else None

    def _kwargs(self, log: list[Any]) -> dict[str, Any]:
        return {"trigger": EventTimeTrigger() if self.setup.explicit_trigger else None,
                "allowed_lateness_ms": self.setup.lateness_ms, "window_function": self._function(log),
                "clock": self.clock}

    def _make_ref(self) -> WindowOperator:
        return WindowOperator(EventTimeSessionWindows(self.setup.gap_ms), CONTENTS[self.setup.contents][0](),
                              **self._kwargs(self.cleared_ref))

    def _make_fast(self) -> SessionWindowOperator:
        return SessionWindowOperator(EventTimeSessionWindows(self.setup.gap_ms), CONTENTS[self.setup.contents][0](),
                                     **self._kwargs(self.cleared_fast))

    def both(self, call: Callable[[Any], Any]) -> None:
        outcomes = []
        for op in (self.ref, self.fast):
            try:
                outcomes.append(("ok", call(op)))
            except (BadRecordError, PipelineError) as e:
                outcomes.append((type(e).__name__, str(e)))
        assert outcomes[1] == outcomes[0]
        self.check()

    def check(self) -> None:
        for name in ("late_count", "unassigned_count", "windowed_count", "fired_count", "current_watermark"):
            assert getattr(self.fast, name) == getattr(self.ref, name), name
        assert self.cleared_fast == self.cleared_ref
        assert self.fast.open_windows() == self.ref.open_windows()
        assert self.fast.state_size() == self.ref.state_size()

    def move(self, crossed: bool) -> None:
        ref_slices, fast_slices = self.ref.take_key_slices(), self.fast.take_key_slices()
        assert _sorted(fast_slices) == _sorted(ref_slices)
        assert self.ref.take_key_slices() == {} and self.fast.take_key_slices() == {}
        watermark = self.ref.current_watermark
        self.ref, self.fast = self._make_ref(), self._make_fast()
        for op, slices in ((self.ref, fast_slices if crossed else ref_slices),
                           (self.fast, ref_slices if crossed else fast_slices)):
            op.current_watermark = watermark
            for key in sorted(slices):
                op.put_key_slice(key, slices[key][0])
        self.check()


def _sorted(slices: KeySlices) -> dict[Any, Any]:
    out = {}
    for key, (data, next_event, next_processing) in slices.items():
        merging = data["merging"]
        out[key] = ({**data,
                     "windows": sorted(data["windows"], key=lambda p: p[0]),
                     "fires": sorted(data["fires"]),
                     "merging": None if merging is None else sorted(merging),
                     "event_timers": sorted(data["event_timers"], key=lambda t: (t[0], t[1]))},
                    next_event, next_processing)
    return out


setups = st.builds(
    Setup,
    gap_ms=st.integers(1, 6),
    lateness_ms=st.sampled_from([0, 0, 1, 3, 8]),
    contents=st.sampled_from(sorted(CONTENTS)),
    function=st.sampled_from(["none", "process", "plain"]),
    explicit_trigger=st.booleans(),
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("element"), st.sampled_from("abc"), st.sampled_from(range(-12, 13)), st.integers(0, 15)),
        st.tuples(st.just("element"), st.sampled_from("ab"), st.sampled_from(range(-4, 5)), st.integers(0, 15)),
        st.tuples(st.just("element"), st.just("a"), st.sampled_from(range(-6, 7)), st.integers(0, 15)),
        st.tuples(st.just("watermark"), st.sampled_from(range(-2, 6))),
        st.tuples(st.just("end"),),
        st.tuples(st.just("processing_time"), st.integers(0, 50)),
        st.tuples(st.just("move"), st.booleans()),
    ),
    min_size=20,
    max_size=80,
)
"""Element timestamps are relative to the watermark (0 before the first), so that many are late,
or late but touching a live session, or (after ``MAX_TIMESTAMP``) at the end of time."""


def _drive(setup: Setup, script: list[tuple[Any, ...]]) -> None:
    pair = Pair(setup)
    make_element = CONTENTS[setup.contents][1]
    watermark = MIN_TIMESTAMP
    for step in script:
        if step[0] == "element":
            _, key, offset, value = step
            ts = min(max(watermark, 0) + offset, MAX_TIMESTAMP)
            element = make_element(value)
            pair.both(lambda op, key=key, element=element, ts=ts: op.process_element(key, element, ts))
        elif step[0] == "watermark":
            watermark = min(max(watermark, 0) + step[1], MAX_TIMESTAMP)
            pair.both(lambda op, w=watermark: op.advance_watermark(w))
        elif step[0] == "end":
            watermark = MAX_TIMESTAMP
            pair.both(lambda op: op.advance_watermark(MAX_TIMESTAMP))
        elif step[0] == "processing_time":
            pair.clock.set(step[1])
            pair.both(lambda op, now=step[1]: op.advance_processing_time(now))
        else:
            pair.move(crossed=step[1])
    pair.both(lambda op: op.advance_watermark(MAX_TIMESTAMP))
    pair.move(crossed=False)


@settings(max_examples=400, deadline=None)
@given(setups, steps)
def test_the_session_operator_gives_the_generic_operators_events_counters_and_slices(
    setup: Setup, script: list[tuple[Any, ...]]
) -> None:
    _drive(setup, script)


# -- the tricky rules, by hand ------------------------------------------------------------------
def _run(lateness_ms: int, script: list[tuple[Any, ...]], gap_ms: int = 3) -> list[Any]:
    """Both operators on ``script`` (``("e", key, ts)``, ``("w", watermark)``, ``("m",)``); the
    events they gave, checked equal."""
    pair = Pair(Setup(gap_ms, lateness_ms, "concat", "none", False))
    events: list[Any] = []
    for step in script:
        if step[0] == "m":
            pair.move(crossed=True)
            continue
        call: Callable[[Any], Any] = ((lambda op, s=step: op.process_element(s[1], (s[2],), s[2])) if step[0] == "e"
                                      else (lambda op, s=step: op.advance_watermark(s[1])))
        out = call(pair.ref)
        assert call(pair.fast) == out
        pair.check()
        events.extend(out)
    return events


def _fired(events: list[Any]) -> list[tuple[Any, ...]]:
    return [(e.key, e.window.start, e.window.end, e.outputs[0].value, e.fire_index, e.cause)
            for e in events if isinstance(e, WindowFired)]


def test_a_late_element_whose_window_merges_into_a_live_session_is_not_late() -> None:
    #   session a: [10, 13) live until 12 + 2;  watermark 11;  element at 8: [8, 11) touches it
    events = _run(2, [("e", "a", 10), ("w", 11), ("e", "a", 8), ("w", 100)])
    assert not any(isinstance(e, LateElement) for e in events)
    assert _fired(events) == [("a", 8, 13, (10, 8), 0, "watermark")]


def test_an_element_late_for_its_own_session_that_touches_nothing_is_late() -> None:
    events = _run(2, [("e", "a", 20), ("w", 11), ("e", "a", 5)])  # [5, 8): 7 + 2 <= 11
    assert [(type(e), e.windows) for e in events] == [(LateElement, (TimeWindow(5, 8),))]


def test_touching_sessions_merge() -> None:
    #   [0, 3) and [3, 6) touch at 3
    assert _fired(_run(0, [("e", "a", 0), ("e", "a", 3), ("w", 10)])) == [("a", 0, 6, (0, 3), 0, "watermark")]


def test_an_element_inside_a_session_fired_within_lateness_refires_it_with_the_next_fire_index() -> None:
    events = _run(5, [("e", "a", 0), ("e", "a", 2), ("w", 6), ("e", "a", 1), ("m",), ("e", "a", 2), ("w", 100)])
    assert _fired(events) == [("a", 0, 5, (0, 2), 0, "watermark"), ("a", 0, 5, (0, 2, 1), 1, "element"),
                              ("a", 0, 5, (0, 2, 1, 2), 2, "element")]


def test_a_merge_past_the_watermark_fires_at_once_and_starts_its_fire_count_afresh() -> None:
    #   [0, 3) fired at 2; [4, 7) pending; 3 bridges them into [0, 7) while the watermark is 6
    events = _run(10, [("e", "a", 0), ("e", "a", 4), ("w", 6), ("e", "a", 3), ("w", 100)])
    assert _fired(events) == [("a", 0, 3, (0,), 0, "watermark"), ("a", 4, 7, (4,), 0, "watermark"),
                              ("a", 0, 7, (0, 4, 3), 0, "element")]


def test_timers_of_equal_time_fire_in_registration_order_across_keys_and_slices() -> None:
    events = _run(0, [("e", "b", 0), ("e", "a", 0), ("m",), ("e", "d", 0), ("e", "c", 0),
                      ("w", MAX_TIMESTAMP)])
    assert [e.key for e in events] == ["a", "b", "d", "c"]  # slices go back in key order, then new timers
    assert {e.cause for e in events} == {"end_of_input"}


def test_a_merge_that_would_end_a_session_before_the_watermark_fails_as_the_generic_operator_does() -> None:
    near = MAX_TIMESTAMP - 4
    pair = Pair(Setup(3, 2, "sum", "none", False))
    pair.both(lambda op: op.process_element("a", {"value": 1}, near))
    pair.both(lambda op: op.advance_watermark(MAX_TIMESTAMP))
    pair.both(lambda op: op.process_element("a", {"value": 1}, near - 3))
    pair.move(crossed=True)


def test_state_of_another_trigger_is_refused() -> None:
    data = {"key": "a", "windows": [], "triggers": [(TimeWindow(0, 3), {"count": 1})], "fires": [],
            "merging": None, "event_timers": [], "processing_timers": [], "state": []}
    with pytest.raises(PipelineError, match="WindowOperator"):
        SessionWindowOperator(EventTimeSessionWindows(3), ListContents()).put_key_slice("a", data)  # type: ignore[arg-type]


@dataclass(frozen=True)
class _Spec:
    assigner: Any
    contents: Any = field(default_factory=ListContents)
    trigger: Any = None
    allowed_lateness_ms: int = 0
    window_function: Any = None


def test_only_event_time_sessions_with_the_event_time_trigger_get_the_session_operator() -> None:
    from lowwater.core.windows import CountTrigger, ProcessingTimeSessionWindows, TumblingEventTimeWindows

    clock = ManualClock(0)
    assert isinstance(session_operator_for(_Spec(EventTimeSessionWindows(3)), clock), SessionWindowOperator)
    assert session_operator_for(_Spec(EventTimeSessionWindows(3), trigger=EventTimeTrigger()), clock) is not None
    assert session_operator_for(_Spec(EventTimeSessionWindows(3), trigger=CountTrigger(2)), clock) is None
    assert session_operator_for(_Spec(ProcessingTimeSessionWindows(3)), clock) is None
    assert session_operator_for(_Spec(TumblingEventTimeWindows(3)), clock) is None
