"""The keyed process operator: runs a (co-)process function with keyed state and timers.

Pure logic, driven by a runtime: :meth:`KeyedProcessOperator.process_element` for each
element, :meth:`~KeyedProcessOperator.advance_watermark` when the operator's combined
watermark advances, :meth:`~KeyedProcessOperator.advance_processing_time` at batch
ends. Each returns what the function emitted, as typed events.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from lowwater.core.clock import Clock
from lowwater.core.errors import not_an_output_tag
from lowwater.core.process.functions import Collector, ProcessContext, RuntimeContext, TimeDomain
from lowwater.core.process.state import InMemoryKeyedStateBackend, KeyedStateBackend
from lowwater.core.time import MIN_TIMESTAMP
from lowwater.core.windows.key_slice import KeySlice, KeySlices, new_key_slice, put_timers, take_timers
from lowwater.core.windows.timers import Timer, TimerQueue

__all__ = ["Emitted", "KeyedProcessOperator", "SideEmitted"]


@dataclass(frozen=True)
class Emitted:
    """A value the function emitted, with the timestamp it carries downstream."""

    value: Any
    timestamp: int | None


@dataclass(frozen=True)
class SideEmitted:
    """A value for a side output."""

    tag: Any
    value: Any
    timestamp: int | None


def _takes_collector(method: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3


class KeyedProcessOperator:
    """Runs ``function`` per key. ``inputs`` is 1 (``KeyedProcessFunction``) or 2
    (``KeyedCoProcessFunction``: ``process_element1`` / ``process_element2``).

    Timers follow Flink's ``InternalTimerServiceImpl``: one per (key, time); event-time
    timers with ``timestamp <= watermark`` fire in timestamp order when the watermark
    advances (a timer registered while firing, at or behind it, fires in the same pass);
    processing-time timers when the clock reaches them.
    """

    def __init__(self, function: Any, clock: Clock, inputs: int = 1,
                 state: KeyedStateBackend | None = None, name: str = "",
                 is_tag: Callable[[Any], bool] | None = None) -> None:
        self.function = function
        self.is_tag = is_tag
        """Recognises a side-output tag, so that ``yield tag, value`` (PyFlink) goes to it."""
        self.clock = clock
        self.inputs = inputs
        self.name = name
        self.state: KeyedStateBackend = state if state is not None else InMemoryKeyedStateBackend()
        self.event_timers = TimerQueue()
        self.processing_timers = TimerQueue()
        self.current_watermark = MIN_TIMESTAMP
        self.current_key: Hashable = None
        self.current_timestamp: int | None = None
        self.current_time_domain: TimeDomain | None = None
        self.elements_in = 0
        self.timers_fired = 0
        self._opened = False
        self._out: list[Emitted | SideEmitted] = []

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["_opened"] = False  # handles are rebuilt by open() after a restore
        d["_out"] = []
        return d

    # -- the function -----------------------------------------------------------------
    def open(self) -> None:
        if self._opened:
            return
        self._opened = True
        rc = RuntimeContext(self.state, lambda: self.current_key, self.name)
        self.function._runtime_context = rc
        self.function.open(rc)

    def _call(self, method: Callable[..., Any], first: Any) -> None:
        ctx = ProcessContext(self)
        if _takes_collector(method):
            result = method(first, ctx, Collector(self._collect))
        else:
            result = method(first, ctx)
        if result is not None:
            if isinstance(result, str | bytes | bytearray | dict) or not hasattr(result, "__iter__"):
                # iterated, a returned text made an output per character and a dict one per field name
                raise TypeError(f"{getattr(method, '__name__', 'the function')} returned {type(result).__name__} "
                                f"{result!r:.60}, not outputs: a process function yields each output (or returns "
                                "a list of them): yield the value, or return [value]")
            for v in result:
                self._collect(v)

    def _collect(self, value: Any) -> None:
        if self.is_tag is not None and isinstance(value, tuple) and len(value) == 2 and self.is_tag(value[0]):
            self.side_output(value[0], value[1])
        else:
            self._out.append(Emitted(value, self._output_timestamp()))

    def side_output(self, tag: Any, value: Any) -> None:
        if self.is_tag is not None and not self.is_tag(tag):  # raised in the function, which it names
            raise TypeError(not_an_output_tag(tag))
        self._out.append(SideEmitted(tag, value, self._output_timestamp()))

    def _output_timestamp(self) -> int | None:
        """An output's timestamp: the element's, or the event-time timer's. A processing-time timer's
        outputs have none (Flink's ``collector.eraseTimestamp()``), though ``ctx.timestamp()`` is its
        time: until session 58 they carried the wall clock as event time, and an event-time window
        downstream grouped them by it (a user probe)."""
        if self.current_time_domain is TimeDomain.PROCESSING_TIME:
            return None
        return self.current_timestamp

    def _drain(self) -> list[Emitted | SideEmitted]:
        out, self._out = self._out, []
        return out

    # -- timers (called through ctx.timer_service()) ------------------------------------
    def register_timer(self, domain: TimeDomain, timestamp: int) -> None:
        queue = self.event_timers if domain is TimeDomain.EVENT_TIME else self.processing_timers
        queue.register(Timer(timestamp, self.current_key, None))

    def delete_timer(self, domain: TimeDomain, timestamp: int) -> None:
        queue = self.event_timers if domain is TimeDomain.EVENT_TIME else self.processing_timers
        queue.delete(Timer(timestamp, self.current_key, None))

    # -- driving ----------------------------------------------------------------------
    def process_element(self, key: Hashable, value: Any, timestamp: int | None,
                        input_index: int = 0) -> list[Emitted | SideEmitted]:
        """Run the function on one element of input ``input_index`` (0 or 1).

        An element the function rejects (it raises, a ``BadRecordError`` say) is not counted in
        ``elements_in`` and emits nothing: its caller dead-letters it, and the accounting counts
        it there, once. What the function had emitted for it before raising is dropped with it."""
        self.open()
        self.current_key, self.current_timestamp, self.current_time_domain = key, timestamp, None
        if self.inputs == 1:
            method = self.function.process_element
        else:
            method = self.function.process_element1 if input_index == 0 else self.function.process_element2
        before = len(self._out)
        try:
            self._call(method, value)
        except BaseException:
            del self._out[before:]
            raise
        self.elements_in += 1
        return self._drain()

    def _fire(self, domain: TimeDomain) -> Callable[[Timer], None]:
        def fire(timer: Timer) -> None:
            self.timers_fired += 1
            self.current_key, self.current_timestamp, self.current_time_domain = timer.key, timer.timestamp, domain
            self._call(self.function.on_timer, timer.timestamp)

        return fire

    def advance_watermark(self, watermark: int) -> list[Emitted | SideEmitted]:
        """The watermark is now ``watermark``: fire the event-time timers it passed."""
        self.open()
        self.current_watermark = max(self.current_watermark, watermark)
        self.event_timers.fire_until(self.current_watermark, self._fire(TimeDomain.EVENT_TIME))
        return self._drain()

    def advance_processing_time(self, now_ms: int) -> list[Emitted | SideEmitted]:
        """Fire the processing-time timers at or before ``now_ms``."""
        if len(self.processing_timers) == 0:
            return []
        self.open()
        self.processing_timers.fire_until(now_ms, self._fire(TimeDomain.PROCESSING_TIME))
        return self._drain()

    def pending_timers(self) -> int:
        return len(self.event_timers) + len(self.processing_timers)

    # -- snapshot and restore ---------------------------------------------------------
    _DATA = ("state", "event_timers", "processing_timers", "current_watermark", "elements_in", "timers_fired")
    """The operator's data; the function and the clock are code."""

    def snapshot(self) -> dict[str, Any]:
        """The operator's data, for :meth:`restore` into an operator built from the current code
        (a restart: a fixed function takes effect). It shares the operator's containers: take it
        from an operator that is done with (a restored checkpoint's)."""
        return {name: getattr(self, name) for name in self._DATA}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Take over the data of :meth:`snapshot`."""
        for name in self._DATA:
            setattr(self, name, snapshot[name])

    def _entries(self) -> dict[tuple[str, Hashable], Any]:
        if not isinstance(self.state, InMemoryKeyedStateBackend):
            raise TypeError(f"key slices need the in-memory keyed state backend, not {type(self.state).__name__}")
        return self.state.entries

    def put_key_slice(self, key: Hashable, data: KeySlice) -> None:
        """Load one key's slice (from :meth:`take_key_slices`) into this operator."""
        entries = self._entries()
        for name, v in data["state"]:
            entries[(name, key)] = v
        put_timers(key, data, self.event_timers, self.processing_timers)  # a process timer has no window

    def take_key_slices(self) -> KeySlices:
        """Every key's slice (its named state and timers) with its next timers; the operator is
        left without keyed state."""
        out: dict[Hashable, KeySlice] = {}

        def slot(key: Hashable) -> KeySlice:
            s = out.get(key)
            if s is None:
                s = out[key] = new_key_slice(key)
            return s

        entries = self._entries()
        for (name, key), v in entries.items():
            slot(key)["state"].append((name, v))
        entries.clear()
        return take_timers(out, slot, self.event_timers, self.processing_timers)
