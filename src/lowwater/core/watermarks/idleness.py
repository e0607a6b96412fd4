"""Idleness detection (Flink's ``WatermarksWithIdleness`` and ``IdlenessTimer``)."""

from __future__ import annotations

from typing import Generic, TypeVar

from lowwater.core.clock import Clock
from lowwater.core.errors import ConfigurationError
from lowwater.core.watermarks.generator import WatermarkGenerator
from lowwater.core.watermarks.watermark import WatermarkOutput

__all__ = ["IdlenessTimer", "WatermarksWithIdleness"]

T = TypeVar("T")


class IdlenessTimer:
    """Decides at each periodic check whether a partition is idle.

    Elements count as activity. At each check exactly one of these happens:

    * activity since the last check: the timer is reset, not idle;
    * else, the timer is not running: it starts at ``now``, not idle;
    * else: idle when ``now - start > idle_timeout_ms`` (strictly greater).
    """

    def __init__(self, clock: Clock, idle_timeout_ms: int) -> None:
        self.clock = clock
        self.idle_timeout_ms = idle_timeout_ms
        self.counter = 0
        self.last_counter = 0
        self.start_of_inactivity_ms: int | None = None

    def activity(self) -> None:
        self.counter += 1

    def check_if_idle(self) -> bool:
        if self.counter != self.last_counter:
            self.last_counter = self.counter
            self.start_of_inactivity_ms = None
            return False
        if self.start_of_inactivity_ms is None:
            self.start_of_inactivity_ms = self.clock.now_ms()
            return False
        return self.clock.now_ms() - self.start_of_inactivity_ms > self.idle_timeout_ms


class WatermarksWithIdleness(WatermarkGenerator[T], Generic[T]):
    """Wraps a generator; marks the partition idle after ``idle_timeout_ms`` without elements.

    An idle partition sends ``mark_idle`` once and its generator is not asked to emit.
    It becomes active again when it next emits a watermark: at the first periodic emit
    after new data.
    """

    def __init__(self, watermarks: WatermarkGenerator[T], idle_timeout_ms: int, clock: Clock) -> None:
        if idle_timeout_ms <= 0:
            raise ConfigurationError("idleness", f"must be > 0 ms, got {idle_timeout_ms}")
        self.watermarks = watermarks
        self.idleness_timer = IdlenessTimer(clock, idle_timeout_ms)
        self.is_idle_now = False

    def on_event(self, event: T, event_timestamp: int, output: WatermarkOutput) -> None:
        self.watermarks.on_event(event, event_timestamp, output)
        self.idleness_timer.activity()
        self.is_idle_now = False

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        if self.idleness_timer.check_if_idle():
            if not self.is_idle_now:
                output.mark_idle()
                self.is_idle_now = True
        else:
            self.watermarks.on_periodic_emit(output)

    def __repr__(self) -> str:
        return f"WatermarksWithIdleness({self.watermarks!r}, {self.idleness_timer.idle_timeout_ms} ms)"
