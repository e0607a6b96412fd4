"""Event-time session windows with the event-time trigger, without the generic machinery.

:class:`SessionWindowOperator` is a drop-in for :class:`~lowwater.core.windows.WindowOperator`
built with :class:`~lowwater.core.windows.EventTimeSessionWindows` and the default trigger
(:class:`~lowwater.core.windows.EventTimeTrigger`): the same events in the same order, the same
counters and the same key slices, so state written by one is read by the other. It keeps
windows as ``(start, end)`` pairs and timers as tuples, and builds
:class:`~lowwater.core.windows.TimeWindow` objects only for events and slices.

The rules it keeps are Flink's, as the generic operator implements them (with ``lateness``
the allowed lateness and ``cleanup(w) = min(w.end - 1 + lateness, MAX_TIMESTAMP)``):

* an element opens ``[ts, ts + gap)``; the key's sessions that overlap or touch it merge into
  their cover, which keeps the state window of the earliest of them; a new window inside one
  session is no real merge;
* a merge registers the cover's timer at ``end - 1`` only if that is past the watermark, and
  deletes the merged sessions' timers and fire counts;
* the lateness check comes after the merge: the element is late only if the session it ended
  up in has ``cleanup(session) <= watermark``;
* a session whose ``end - 1 <= watermark`` fires at once when an element joins it, otherwise
  it registers its timer at ``end - 1``; its cleanup timer is at ``cleanup(session)`` (none at
  ``MAX_TIMESTAMP``);
* timers fire in timestamp order over all keys, equal timestamps in the order they were
  registered.

>>> from lowwater.core.windows import EventTimeSessionWindows, ReducingContents
>>> op = SessionWindowOperator(EventTimeSessionWindows(3), ReducingContents(lambda a, b: a + b))
>>> _ = op.process_element("k", 1, 0), op.process_element("k", 2, 3)
>>> [(e.window, e.outputs[0].value) for e in op.advance_watermark(5)]
[(TimeWindow[0, 6), 3)]
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable
from operator import itemgetter
from typing import Any, Protocol

from lowwater.core.clock import Clock, ManualClock
from lowwater.core.errors import ConfigurationError, PipelineError
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.windows.assigner import WindowAssigner
from lowwater.core.windows.contents import WindowContents
from lowwater.core.windows.events import FireCause, LateElement, SideOutput, WindowFired, WindowResult
from lowwater.core.windows.functions import ProcessWindowFunction, open_once
from lowwater.core.windows.key_slice import KeySlice, KeySlices, new_key_slice
from lowwater.core.windows.operator import WindowFunctionContext
from lowwater.core.windows.session import EventTimeSessionWindows
from lowwater.core.windows.trigger import Trigger
from lowwater.core.windows.triggers.event_time import EventTimeTrigger
from lowwater.core.windows.window import TimeWindow

__all__ = ["SessionWindowOperator", "WindowSpec", "session_operator_for"]

WindowFunction = ProcessWindowFunction[Any, Any] | Callable[[Any, Any, Iterable[Any]], Iterable[Any]]
Event = WindowFired | LateElement | SideOutput
Pair = tuple[int, int]
"""A window as ``(start, end)``."""

_MISSING: Any = object()


class WindowSpec(Protocol):
    """What a window transformation says about its operator."""

    @property
    def assigner(self) -> WindowAssigner[Any]: ...
    @property
    def contents(self) -> WindowContents: ...
    @property
    def trigger(self) -> Trigger[Any] | None: ...
    @property
    def allowed_lateness_ms(self) -> int: ...
    @property
    def window_function(self) -> WindowFunction | None: ...


def session_operator_for(t: WindowSpec, clock: Clock) -> SessionWindowOperator | None:
    """A :class:`SessionWindowOperator` for ``t``, or ``None`` when ``t`` is not event-time
    sessions with the event-time trigger (the generic operator then runs it)."""
    if type(t.assigner) is not EventTimeSessionWindows:
        return None
    if t.trigger is not None and type(t.trigger) is not EventTimeTrigger:
        return None
    return SessionWindowOperator(t.assigner, t.contents, trigger=t.trigger, allowed_lateness_ms=t.allowed_lateness_ms,
                                 window_function=t.window_function, clock=clock)


class _Key:
    """One key's sessions: each window's state window, the contents per state window, fire counts."""

    __slots__ = ("fires", "mapping", "states")

    def __init__(self) -> None:
        self.mapping: dict[Pair, Pair] = {}
        self.states: dict[Pair, Any] = {}
        self.fires: dict[Pair, int] = {}


class SessionWindowOperator:
    """Keyed event-time session windows fired by the watermark (see the module).

    Parameters are those of :class:`~lowwater.core.windows.WindowOperator`; ``trigger`` must be
    ``None`` or an :class:`~lowwater.core.windows.EventTimeTrigger`.
    """

    is_event_time = True
    is_merging = True

    def __init__(
        self,
        assigner: EventTimeSessionWindows,
        contents: WindowContents,
        *,
        trigger: Trigger[Any] | None = None,
        allowed_lateness_ms: int = 0,
        window_function: WindowFunction | None = None,
        clock: Clock | None = None,
    ) -> None:
        if allowed_lateness_ms < 0:
            raise ConfigurationError(
                "allowed_lateness", f"The allowed lateness cannot be negative, got {allowed_lateness_ms} ms"
            )
        if type(assigner) is not EventTimeSessionWindows:
            raise ConfigurationError("assigner", f"{assigner!r} is not EventTimeSessionWindows; use WindowOperator")
        if trigger is not None and type(trigger) is not EventTimeTrigger:
            raise ConfigurationError("trigger", f"{trigger!r} is not the event-time trigger; use WindowOperator")
        self.assigner = assigner
        self.contents = contents
        self.trigger: Trigger[Any] = trigger if trigger is not None else EventTimeTrigger()
        self.allowed_lateness_ms = allowed_lateness_ms
        self.window_function = window_function
        self.clock: Clock = clock if clock is not None else ManualClock(0)
        self._gap_ms = assigner.gap_ms

        self.keys: dict[Hashable, _Key] = {}
        self.timer_heap: list[tuple[int, int, Hashable, int, int]] = []
        """``(timestamp, seq, key, start, end)``; an entry whose timer was deleted stays until popped."""
        self.live_timers: set[tuple[int, Hashable, int, int]] = set()
        self.timer_seq = 0
        self.processing_timers: list[tuple[int, Hashable, Any]] = []
        """Processing-time timers from slices (this operator registers none); dropped when due."""
        self.current_watermark = MIN_TIMESTAMP

        self.late_count = 0
        self.unassigned_count = 0
        self.windowed_count = 0
        self.fired_count = 0
        self._out: list[Event] = []

    # -- timers ---------------------------------------------------------------------------
    def _register(self, ts: int, key: Hashable, start: int, end: int) -> None:
        timer = (ts, key, start, end)
        if timer not in self.live_timers:
            self.live_timers.add(timer)
            heapq.heappush(self.timer_heap, (ts, self.timer_seq, key, start, end))
            self.timer_seq += 1

    def _cleanup_time(self, end: int) -> int:
        t = end - 1 + self.allowed_lateness_ms
        return t if t <= MAX_TIMESTAMP else MAX_TIMESTAMP

    # -- input ----------------------------------------------------------------------------
    def process_element(self, key: Hashable, element: Any, timestamp: int) -> list[Event]:
        """Process one element of ``key`` with its event ``timestamp``."""
        start, end = timestamp, timestamp + self._gap_ms
        wm = self.current_watermark
        k = self.keys.get(key)
        if k is None:
            k = self.keys[key] = _Key()
        mapping = k.mapping
        touching = [w for w in mapping if w[0] <= end and w[1] >= start]
        if not touching:
            actual = (start, end)
            mapping[actual] = actual
        elif len(touching) == 1 and touching[0][0] <= start and end <= touching[0][1]:
            actual = touching[0]  # inside one session: no real merge
        else:
            touching.sort()
            actual = (min(start, touching[0][0]), max(end, touching[-1][1]))
            state_window = mapping[touching[0]]
            merged_states = [mapping.pop(w) for w in touching]
            mapping[actual] = state_window
            self._merge(key, k, actual, touching, state_window, merged_states[1:])
        cleanup = actual[1] - 1 + self.allowed_lateness_ms
        if cleanup > MAX_TIMESTAMP:
            cleanup = MAX_TIMESTAMP
        if cleanup <= wm:  # late, after merging
            del mapping[actual]
            if timestamp + self.allowed_lateness_ms <= wm:
                self.late_count += 1
                self._out.append(LateElement(key, element, timestamp, wm, (TimeWindow(*actual),)))
            else:
                self.unassigned_count += 1
        else:
            state_window = mapping[actual]
            states = k.states
            current = states.get(state_window, _MISSING)
            states[state_window] = self.contents.add(
                None if current is _MISSING else current, element, current is _MISSING)
            start, end = actual
            max_ts = end - 1
            live = self.live_timers
            if max_ts <= wm:
                self._emit(key, k, actual, state_window, "element")
            elif (max_ts, key, start, end) not in live:  # register the trigger's timer (as _register)
                live.add((max_ts, key, start, end))
                heapq.heappush(self.timer_heap, (max_ts, self.timer_seq, key, start, end))
                self.timer_seq += 1
            if cleanup != MAX_TIMESTAMP and (cleanup, key, start, end) not in live:  # and the cleanup timer
                live.add((cleanup, key, start, end))
                heapq.heappush(self.timer_heap, (cleanup, self.timer_seq, key, start, end))
                self.timer_seq += 1
            self.windowed_count += 1
        if not mapping and not k.states and not k.fires:
            del self.keys[key]
        out, self._out = self._out, []
        return out

    def _merge(self, key: Hashable, k: _Key, result: Pair, merged: list[Pair], state_window: Pair,
               merged_states: list[Pair]) -> None:
        wm = self.current_watermark
        max_ts = result[1] - 1
        if max_ts + self.allowed_lateness_ms <= wm:
            raise PipelineError(
                "The end timestamp of an event-time window cannot become earlier than the current "
                f"watermark by merging. Current watermark: {wm} window: {TimeWindow(*result)!r}"
            )
        if max_ts > wm:
            self._register(max_ts, key, result[0], result[1])
        live = self.live_timers
        fires = k.fires
        for start, end in merged:
            live.discard((end - 1, key, start, end))
            fires.pop((start, end), None)
            cleanup = self._cleanup_time(end)
            if cleanup != MAX_TIMESTAMP:
                live.discard((cleanup, key, start, end))
        states = k.states
        target = states.get(state_window, _MISSING)
        for sw in merged_states:
            src = states.pop(sw, _MISSING)
            if src is _MISSING:
                continue
            target = src if target is _MISSING else self.contents.merge(target, src)
        if target is not _MISSING:
            states[state_window] = target

    # -- watermarks -----------------------------------------------------------------------
    def advance_watermark(self, watermark: int) -> list[Event]:
        """Fire everything ``watermark`` triggers. Forward the watermark only after this."""
        if watermark > self.current_watermark:
            self.current_watermark = watermark
            heap, live, keys = self.timer_heap, self.live_timers, self.keys
            cause: FireCause = "end_of_input" if watermark == MAX_TIMESTAMP else "watermark"
            while heap and heap[0][0] <= watermark:
                ts, _, key, start, end = heapq.heappop(heap)
                timer = (ts, key, start, end)
                if timer in live:
                    live.discard(timer)
                    self._on_timer(ts, key, start, end, keys, cause)
        out, self._out = self._out, []
        return out

    def _on_timer(self, ts: int, key: Hashable, start: int, end: int, keys: dict[Hashable, _Key],
                  cause: FireCause) -> None:
        k = keys.get(key)
        window = (start, end)
        state_window = k.mapping.get(window) if k is not None else None
        if k is None or state_window is None:
            return
        if ts == end - 1:
            self._emit(key, k, window, state_window, cause)
        if self._cleanup_time(end) == ts:
            k.states.pop(state_window, None)
            self.live_timers.discard((end - 1, key, start, end))
            k.fires.pop(window, None)
            if isinstance(self.window_function, ProcessWindowFunction):
                open_once(self, self.window_function)
                self.window_function.clear(WindowFunctionContext(self, TimeWindow(start, end)))
            del k.mapping[window]
            if not k.mapping and not k.states and not k.fires:
                del keys[key]

    def advance_processing_time(self, now_ms: int | None = None) -> list[Event]:
        """Drop the processing-time timers due by ``now_ms`` (they fire nothing here)."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        if self.processing_timers:
            self.processing_timers = [t for t in self.processing_timers if t[0] > now]
        out, self._out = self._out, []
        return out

    # -- output ---------------------------------------------------------------------------
    def _emit(self, key: Hashable, k: _Key, window: Pair, state_window: Pair, cause: FireCause) -> None:
        state = k.states.get(state_window, _MISSING)
        if state is _MISSING:
            return
        inputs = self.contents.inputs(state)
        fire_index = k.fires.get(window, 0)
        k.fires[window] = fire_index + 1
        self.fired_count += 1
        start, end = window
        tw = TimeWindow(start, end)
        outputs: tuple[Any, ...]
        fn = self.window_function
        if fn is not None:
            ctx = WindowFunctionContext(self, tw)
            open_once(self, fn)
            produced = fn.process(key, ctx, inputs) if isinstance(fn, ProcessWindowFunction) else fn(key, ctx, inputs)
            outputs = tuple(produced) if produced is not None else ()
        else:
            value = inputs[0] if len(inputs) == 1 else inputs
            outputs = (WindowResult(key, start, end, value, fire_index),)
        self._out.append(
            WindowFired(key, tw, outputs, fire_index, self.current_watermark, cause, self.contents.size(state))
        )

    # -- key slices -----------------------------------------------------------------------
    def put_key_slice(self, key: Hashable, data: KeySlice) -> None:
        """Load one key's slice (from this operator's or the generic one's ``take_key_slices``)."""
        if data["triggers"]:
            raise PipelineError(f"The state of key {key!r} has trigger state, which the event-time trigger "
                                "never writes: it was written for another trigger. Restore it with WindowOperator.")
        k = self.keys.get(key)
        if k is None:
            k = self.keys[key] = _Key()
        for w, v in data["windows"]:
            k.states[_pair(w)] = v
        for w, n in data["fires"]:
            k.fires[_pair(w)] = n
        if data["merging"] is not None:
            for w, sw in data["merging"]:
                k.mapping[_pair(w)] = _pair(sw)
        for ts, tw in data["event_timers"]:
            self._register(ts, key, *_pair(tw))
        for ts, tw in data["processing_timers"]:
            self.processing_timers.append((ts, key, tw))
        if not k.mapping and not k.states and not k.fires:
            del self.keys[key]

    def take_key_slices(self) -> KeySlices:
        """Every key's slice with its next timers; the operator is left without keyed state.
        Windows are listed by start, timers by timestamp, then start."""
        out: dict[Hashable, KeySlice] = {}
        nexts: dict[Hashable, list[int]] = {}

        def slot(key: Hashable) -> KeySlice:
            s = out.get(key)
            if s is None:
                s = out[key] = new_key_slice(key)
                nexts[key] = [MAX_TIMESTAMP, MAX_TIMESTAMP]
            return s

        for key, k in self.keys.items():
            if not (k.states or k.fires or k.mapping):
                continue
            s = slot(key)
            s["windows"] = [(TimeWindow(*w), v) for w, v in sorted(k.states.items(), key=itemgetter(0))]
            s["fires"] = [(TimeWindow(*w), n) for w, n in sorted(k.fires.items())]
            if k.mapping:
                s["merging"] = [(TimeWindow(*w), TimeWindow(*sw)) for w, sw in sorted(k.mapping.items())]
        for ts, key, start, end in sorted(self.live_timers, key=lambda t: (t[0], t[2], t[3])):
            slot(key)["event_timers"].append((ts, TimeWindow(start, end)))
            due = nexts[key]
            due[0] = min(due[0], ts)
        for ts, key, w in sorted(self.processing_timers, key=itemgetter(0)):
            slot(key)["processing_timers"].append((ts, w))
            due = nexts[key]
            due[1] = min(due[1], ts)
        self.keys = {}
        self.timer_heap = []
        self.live_timers = set()
        self.processing_timers = []
        return {key: (s, nexts[key][0], nexts[key][1]) for key, s in out.items()}

    # -- snapshot, the assigner context and introspection --------------------------------
    _DATA = ("keys", "timer_heap", "live_timers", "timer_seq", "processing_timers", "current_watermark",
             "late_count", "unassigned_count", "windowed_count", "fired_count")

    def snapshot(self) -> dict[str, Any]:
        """The operator's data (shared, not copied), for :meth:`restore` into a new operator."""
        return {name: getattr(self, name) for name in self._DATA}

    def restore(self, snapshot: dict[str, Any]) -> None:
        for name in self._DATA:
            setattr(self, name, snapshot[name])

    def current_processing_time(self) -> int:
        return self.clock.now_ms()

    def open_windows(self) -> int:
        """Windows of any key holding state."""
        return sum(len(k.states) for k in self.keys.values())

    def state_size(self) -> int:
        """State entries: window contents, fire counters, timers and merged windows."""
        return (sum(len(k.states) + len(k.fires) + len(k.mapping) for k in self.keys.values())
                + len(self.live_timers) + len(self.processing_timers))


def _pair(window: Any) -> Pair:
    if not isinstance(window, TimeWindow):
        raise PipelineError(f"The state holds {window!r}, not a session window: it was written for other windows.")
    return (window.start, window.end)
