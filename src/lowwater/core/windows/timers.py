"""Timers per (key, window), fired in timestamp order (Flink's ``InternalTimerService``)."""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from lowwater.core.errors import PipelineError
from lowwater.core.time import MIN_TIMESTAMP

__all__ = ["Timer", "TimerQueue"]


@dataclass(frozen=True)
class Timer:
    timestamp: int
    key: Hashable
    window: Any


CHAINED_FIRINGS = 100_000
"""Firings of one key's (and window's) timers in one advance of time after which they are checked
for timers that register each other for ever (:meth:`TimerQueue.fire_until`): at the end of
input's final watermark (``MAX``) they are taken for such; before it, only if their timestamps did
not move on over the last as many firings."""
SAME_TIMER_FIRINGS = 10_000
"""Firings of one same timer in a row, each registering it again, past which it is taken for one that does for ever."""
COUNTED_AFTER = 10_000
"""Firings in one advance before they are counted per key (:data:`CHAINED_FIRINGS`)."""


def _endless(timer: Timer, times: int, time: int) -> PipelineError:
    from lowwater.core.time import MAX_TIMESTAMP

    window = f" and window {timer.window!r}" if timer.window is not None else ""
    upto = "the end of input's final watermark (MAX)" if time == MAX_TIMESTAMP else str(time)
    return PipelineError(
        f"the timers of key {timer.key!r}{window} fired {times:,} times as time advanced to {upto}, the last at "
        f"{timer.timestamp}: each firing registers another at or before that time, so they would fire for ever "
        "(Flink loops the same way). That is a timer registering the next (timestamp + interval) when the end of "
        "input's final watermark fires every timer up to MAX, or a ContinuousProcessingTimeTrigger on an "
        "event-time window once processing time is past the window's end. Hint: register no further timer once "
        "ctx.timer_service().current_watermark() is MAX_TIMESTAMP (or past the window), or use a processing-time "
        "window with a processing-time trigger (lowwater.core.windows.timers.CHAINED_FIRINGS is the limit)")


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
        """Fire every timer with ``timestamp <= time`` (including ones registered meanwhile).

        Timers that register their next one at or before ``time`` never end (as in Flink): a
        heartbeat ``on_timer`` registering ``timestamp + 1000`` when the final watermark (``MAX``) of
        the end of input fires every timer up to it, a ``ContinuousProcessingTimeTrigger`` on an
        event-time window once processing time is past the window's end. The job hung without a
        word; past :data:`CHAINED_FIRINGS` firings of one key and window in one call (or
        :data:`SAME_TIMER_FIRINGS` of one same timer in a row) it fails, saying so.

        Before ``MAX``, a chain whose timestamps move on ends at ``time``, and it fires to the end,
        as Flink's loop does: a one-second heartbeat after a processing-time outage of two days fires
        172,800 times. It failed past :data:`CHAINED_FIRINGS`, and since a replay runs its batch with
        the clock the batch first had, the job could not resume (a user probe, session 64). A chain
        that fires that many times without its timestamps moving on still fails."""
        from lowwater.core.time import MAX_TIMESTAMP

        heap = self._heap
        fired = 0
        per: Counter[tuple[Hashable, Any]] | None = None  # counted only once a call fires many
        reached: dict[tuple[Hashable, Any], int] = {}  # a chain's last timestamp at its last check
        previous, again = None, 0
        while heap and heap[0][0] <= time:
            _, _, timer = heapq.heappop(heap)
            if timer in self._live:
                self._live.discard(timer)
                on_timer(timer)
                fired += 1
                again = again + 1 if timer == previous else 0
                previous = timer
                if again >= SAME_TIMER_FIRINGS:
                    raise _endless(timer, again + 1, time)
                if fired > COUNTED_AFTER:
                    per = per if per is not None else Counter()
                    chain = (timer.key, timer.window)
                    n = per[chain] = per[chain] + 1
                    if n > CHAINED_FIRINGS and n % CHAINED_FIRINGS == 1:
                        if time == MAX_TIMESTAMP or timer.timestamp <= reached.get(chain, MIN_TIMESTAMP):
                            raise _endless(timer, n, time)
                        reached[chain] = timer.timestamp

    def next_timestamp(self) -> int:
        while self._heap and self._heap[0][2] not in self._live:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else MIN_TIMESTAMP

    def timers(self) -> list[Timer]:
        return sorted(self._live, key=lambda t: t.timestamp)
