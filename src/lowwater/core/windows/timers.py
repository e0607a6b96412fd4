"""Timers per (key, window), fired in timestamp order (Flink's ``InternalTimerService``)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from lowwater.core.time import MIN_TIMESTAMP

__all__ = ["Timer", "TimerQueue"]


@dataclass(frozen=True)
class Timer:
    timestamp: int
    key: Hashable
    window: Any


class TimerQueue:
    """A set of timers with the earliest first. Registering a timer twice keeps one."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Timer]] = []
        self._live: set[Timer] = set()
        self._seq = itertools.count()

    def register(self, timer: Timer) -> None:
        if timer not in self._live:
            self._live.add(timer)
            heapq.heappush(self._heap, (timer.timestamp, next(self._seq), timer))

    def delete(self, timer: Timer) -> None:
        self._live.discard(timer)

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, timer: Timer) -> bool:
        return timer in self._live

    def fire_until(self, time: int, on_timer: Callable[[Timer], None]) -> None:
        """Fire every timer with ``timestamp <= time`` (including ones registered meanwhile)."""
        heap = self._heap
        while heap and heap[0][0] <= time:
            _, _, timer = heapq.heappop(heap)
            if timer in self._live:
                self._live.discard(timer)
                on_timer(timer)

    def next_timestamp(self) -> int:
        while self._heap and self._heap[0][2] not in self._live:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else MIN_TIMESTAMP

    def timers(self) -> list[Timer]:
        return sorted(self._live, key=lambda t: t.timestamp)
