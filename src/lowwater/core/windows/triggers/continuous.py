"""Continuous triggers: fire every ``interval`` until the window ends."""

from __future__ import annotations

from typing import Any

from lowwater.core.errors import ConfigurationError
from lowwater.core.time import DurationLike, to_millis
from lowwater.core.windows.trigger import (
    OnMergeContext,
    ReducingState,
    ReducingStateDescriptor,
    Trigger,
    TriggerContext,
    TriggerResult,
)
from lowwater.core.windows.window import Window

__all__ = ["ContinuousEventTimeTrigger", "ContinuousProcessingTimeTrigger", "java_remainder"]


def java_remainder(a: int, b: int) -> int:
    """``a % b`` with Java's sign (truncated division), as Flink computes fire times."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _interval(interval: DurationLike) -> int:
    ms = to_millis(interval, name="interval")
    if ms <= 0:
        raise ConfigurationError("interval", f"must be > 0 ms, got {ms}")
    return ms


class _Continuous(Trigger[Window]):
    """What both continuous triggers share: a next fire time per window, kept as the minimum
    of a reducing state, re-registered after each firing, capped at ``max_timestamp``."""

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = _interval(interval_ms)
        self.state = ReducingStateDescriptor[int]("fire-time", min)

    def _register_timer(self, ctx: TriggerContext, time: int) -> None:
        raise NotImplementedError

    def _delete_timer(self, ctx: TriggerContext, time: int) -> None:
        raise NotImplementedError

    def _register_next(self, time: int, window: Window, ctx: TriggerContext, fire: ReducingState[int]) -> None:
        nxt = min(time + self.interval_ms, window.max_timestamp())
        fire.add(nxt)
        self._register_timer(ctx, nxt)

    def _fire_if_due(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        fire = ctx.get_partitioned_state(self.state)
        if fire.get() == time:
            fire.clear()
            self._register_next(time, window, ctx, fire)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: OnMergeContext) -> None:
        ctx.merge_partitioned_state(self.state)
        nxt = ctx.get_partitioned_state(self.state).get()
        if nxt is not None:
            self._register_timer(ctx, nxt)

    def clear(self, window: Window, ctx: TriggerContext) -> None:
        fire = ctx.get_partitioned_state(self.state)
        ts = fire.get()
        if ts is not None:
            self._delete_timer(ctx, ts)
            fire.clear()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.interval_ms} ms)"


class ContinuousEventTimeTrigger(_Continuous):
    """Fires at every ``interval`` of event time, and at the window's end.

    Fire times are ``ts - (ts % interval) + k * interval`` (Java's remainder), capped at
    ``max_timestamp``.
    """

    @staticmethod
    def of(interval: DurationLike) -> ContinuousEventTimeTrigger:
        return ContinuousEventTimeTrigger(_interval(interval))

    def _register_timer(self, ctx: TriggerContext, time: int) -> None:
        ctx.register_event_time_timer(time)

    def _delete_timer(self, ctx: TriggerContext, time: int) -> None:
        ctx.delete_event_time_timer(time)

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        if window.max_timestamp() <= ctx.current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        fire = ctx.get_partitioned_state(self.state)
        if fire.get() is None:
            self._register_next(timestamp - java_remainder(timestamp, self.interval_ms), window, ctx, fire)
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        return self._fire_if_due(time, window, ctx)

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE


class ContinuousProcessingTimeTrigger(_Continuous):
    """Fires at every ``interval`` of processing time (the window's end caps the last)."""

    @staticmethod
    def of(interval: DurationLike) -> ContinuousProcessingTimeTrigger:
        return ContinuousProcessingTimeTrigger(_interval(interval))

    def _register_timer(self, ctx: TriggerContext, time: int) -> None:
        ctx.register_processing_time_timer(time)

    def _delete_timer(self, ctx: TriggerContext, time: int) -> None:
        ctx.delete_processing_time_timer(time)

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        fire = ctx.get_partitioned_state(self.state)
        now = ctx.current_processing_time()
        if fire.get() is None:
            self._register_next(now - java_remainder(now, self.interval_ms), window, ctx, fire)
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: TriggerContext) -> TriggerResult:
        return self._fire_if_due(time, window, ctx)
