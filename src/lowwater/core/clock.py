"""Clocks. Time enters the logic only through a :class:`Clock` parameter."""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """A source of processing time in epoch milliseconds."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when told to; for tests, replays and the reference runtime.

    >>> c = ManualClock(1000)
    >>> c.advance(500); c.now_ms()
    1500
    """

    def __init__(self, start_ms: int = 0) -> None:
        self._now = int(start_ms)

    def now_ms(self) -> int:
        return self._now

    def set(self, now_ms: int) -> None:
        self._now = int(now_ms)

    def advance(self, delta_ms: int) -> None:
        self._now += int(delta_ms)

    def __repr__(self) -> str:
        return f"ManualClock({self._now})"
