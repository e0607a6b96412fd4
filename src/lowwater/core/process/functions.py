"""Keyed process functions (Flink's ``KeyedProcessFunction`` and ``KeyedCoProcessFunction``).

Subclass one and give it to ``key_by(...).process(fn)`` or
``connect(...).key_by(k1, k2).process(fn)``::

    class CountWithTimeout(KeyedProcessFunction):
        def open(self, runtime_context):
            self.count = runtime_context.get_state(ValueStateDescriptor("count"))

        def process_element(self, value, ctx):
            self.count.update((self.count.value() or 0) + 1)
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 60_000)

        def on_timer(self, timestamp, ctx):
            yield (ctx.get_current_key(), self.count.value())

A function emits by yielding (PyFlink) or, if it takes a third parameter, through
``out.collect(value)`` (Java). ``ctx.output(tag, value)`` (Java) or ``yield tag, value``
(PyFlink, with an ``OutputTag``) emits to a side output.

Timers (Flink 2.3's ``InternalTimerService``):

* an event-time timer at ``t`` fires when the watermark reaches ``t`` (``watermark >= t``);
* one timer per key and time: registering it again does nothing;
* a timer registered at or behind the watermark fires at the next advance, not at once;
* timers fire in timestamp order, before the operator forwards the watermark, and
  ``ctx.timer_service().current_watermark()`` in ``on_timer`` is the watermark that fired it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from enum import Enum
from typing import Any

from lowwater.core.process.state import (
    InMemoryKeyedStateBackend,
    KeyedStateBackend,
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    StateDescriptor,
    ValueState,
    ValueStateDescriptor,
)
from lowwater.core.time import timer_time

__all__ = [
    "Collector",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "ProcessContext",
    "RuntimeContext",
    "TimeDomain",
    "TimerService",
]


class TimeDomain(Enum):
    """Which clock fired a timer."""

    EVENT_TIME = 0
    PROCESSING_TIME = 1


class Collector:
    """Java's ``Collector<O>``: ``out.collect(value)``."""

    def __init__(self, sink: Callable[[Any], None]) -> None:
        self._sink = sink

    def collect(self, value: Any) -> None:
        self._sink(value)


class TimerService:
    """``ctx.timer_service()``: the operator's time and the current key's timers (ms)."""

    def __init__(self, operator: Any) -> None:
        self._op = operator

    def current_watermark(self) -> int:
        return int(self._op.current_watermark)

    def current_processing_time(self) -> int:
        return int(self._op.clock.now_ms())

    def register_event_time_timer(self, timestamp: int) -> None:
        self._op.register_timer(TimeDomain.EVENT_TIME, timer_time(timestamp))

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._op.delete_timer(TimeDomain.EVENT_TIME, timer_time(timestamp))

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._op.register_timer(TimeDomain.PROCESSING_TIME, timer_time(timestamp))

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._op.delete_timer(TimeDomain.PROCESSING_TIME, timer_time(timestamp))


class ProcessContext:
    """The ``ctx`` of ``process_element`` and ``on_timer``.

    ``timestamp()`` is the element's timestamp (or the timer's), ``get_current_key()``
    the key, ``time_domain()`` the clock of a firing timer (``None`` for an element),
    ``output(tag, value)`` a side output.
    """

    def __init__(self, operator: Any) -> None:
        self._op = operator
        self._timer_service = TimerService(operator)

    def timestamp(self) -> int | None:
        return self._op.current_timestamp  # type: ignore[no-any-return]

    def get_current_key(self) -> Hashable:
        return self._op.current_key  # type: ignore[no-any-return]

    def timer_service(self) -> TimerService:
        return self._timer_service

    def time_domain(self) -> TimeDomain | None:
        return self._op.current_time_domain  # type: ignore[no-any-return]

    def output(self, tag: Any, value: Any) -> None:
        self._op.side_output(tag, value)


class RuntimeContext:
    """What ``open(runtime_context)`` receives: keyed state by descriptor."""

    def __init__(self, backend: KeyedStateBackend, current_key: Callable[[], Hashable], name: str = "") -> None:
        self._backend = backend
        self._key = current_key
        self._name = name

    def get_task_name(self) -> str:
        return self._name

    def get_state(self, descriptor: ValueStateDescriptor | StateDescriptor) -> ValueState:
        return ValueState(descriptor.name, self._backend, self._key)

    def get_list_state(self, descriptor: ListStateDescriptor | StateDescriptor) -> ListState:
        return ListState(descriptor.name, self._backend, self._key)

    def get_map_state(self, descriptor: MapStateDescriptor | StateDescriptor) -> MapState:
        return MapState(descriptor.name, self._backend, self._key)


class _Function:
    _runtime_context: RuntimeContext | None = None

    def open(self, runtime_context: RuntimeContext) -> None:
        """Called once before the first element; get state handles here."""

    def close(self) -> None:
        """PyFlink's ``Function.close``. lowwater does not call it: a micro-batch job's operators
        have no last moment (a run stops, the next one resumes from the checkpoint, and on the
        keyed path a task ends every batch), so hold nothing here that needs closing. (Until
        session 58 this said it was called when the operator ends, and it never was.)"""

    def get_runtime_context(self) -> RuntimeContext:
        """The runtime context (Java's ``getRuntimeContext()``), set before ``open``."""
        if self._runtime_context is None:
            self._runtime_context = RuntimeContext(InMemoryKeyedStateBackend(), lambda: None)
        return self._runtime_context

    def on_timer(self, timestamp: int, ctx: ProcessContext, *out: Collector) -> Any:
        """A registered timer fired (event or processing time, see ``ctx.time_domain()``)."""
        return None


class KeyedProcessFunction(_Function):
    """Processes each element of a keyed stream: ``process_element(value, ctx)``."""

    def process_element(self, value: Any, ctx: ProcessContext, *out: Collector) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement process_element")


class KeyedCoProcessFunction(_Function):
    """Processes the elements of two connected keyed streams: ``process_element1`` for the
    first input, ``process_element2`` for the second."""

    def process_element1(self, value: Any, ctx: ProcessContext, *out: Collector) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement process_element1 (the first input)")

    def process_element2(self, value: Any, ctx: ProcessContext, *out: Collector) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement process_element2 (the second input)")
