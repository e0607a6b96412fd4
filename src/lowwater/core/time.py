"""Time in lowwater: integer milliseconds since the epoch, signed 64-bit.

Durations are integer milliseconds inside the core. :class:`Duration` and
:func:`to_millis` convert ``timedelta`` objects and strings such as ``"10 seconds"``
once, at the API edge.

>>> to_millis("10 seconds")
10000
>>> to_millis(timedelta(minutes=1))
60000
>>> Duration.of_hours(1).millis
3600000
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from datetime import timedelta
from fractions import Fraction

from lowwater.core.errors import ConfigurationError

__all__ = ["MAX_TIMESTAMP", "MIN_TIMESTAMP", "Duration", "DurationLike", "epoch_millis", "timer_time", "to_millis"]

MIN_TIMESTAMP: int = -(2**63)
"""The smallest timestamp (Java's ``Long.MIN_VALUE``): "no watermark yet"."""

MAX_TIMESTAMP: int = 2**63 - 1
"""The largest timestamp (Java's ``Long.MAX_VALUE``): the end-of-input watermark."""

_UNITS_MS: dict[str, int] = {
    "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hr": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}
_DURATION_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$", re.ASCII)  # "٥ s" is no duration


def _whole_millis(value: object, unit_ms: int, method: str) -> int:
    """``value`` units of ``unit_ms`` as whole milliseconds: ``Duration.of_seconds(0.5)`` is 500 ms
    (it was ``int(0.5) * 1000``, 0 ms, without a word); a value that is no whole number of
    milliseconds, or no number, is a :class:`ConfigurationError`."""
    from decimal import Decimal, InvalidOperation

    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Decimal)):
        raise ConfigurationError("duration", f"Duration.{method} takes a number, got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value) * unit_ms
    try:
        ms = Decimal(str(value)) * unit_ms
    except InvalidOperation:
        ms = Decimal("NaN")
    if not ms.is_finite() or ms != ms.to_integral_value():
        raise ConfigurationError("duration", f"Duration.{method}({value!r}) is not a whole number of milliseconds")
    return int(ms)


@dataclass(frozen=True, order=True)
class Duration:
    """A span of time in integer milliseconds.

    Build one with ``Duration.of_seconds(10)``, ``Duration.parse("10 seconds")`` or
    ``Duration.of(timedelta(seconds=10))``.
    """

    millis: int

    @staticmethod
    def of(value: DurationLike, *, name: str = "duration") -> Duration:
        return Duration(to_millis(value, name=name))

    @staticmethod
    def of_millis(ms: int) -> Duration:
        return Duration(_whole_millis(ms, 1, "of_millis"))

    @staticmethod
    def of_seconds(s: int) -> Duration:
        return Duration(_whole_millis(s, 1000, "of_seconds"))

    @staticmethod
    def of_minutes(m: int) -> Duration:
        return Duration(_whole_millis(m, 60_000, "of_minutes"))

    @staticmethod
    def of_hours(h: int) -> Duration:
        return Duration(_whole_millis(h, 3_600_000, "of_hours"))

    @staticmethod
    def of_days(d: int) -> Duration:
        return Duration(_whole_millis(d, 86_400_000, "of_days"))

    @staticmethod
    def parse(text: str, *, name: str = "duration") -> Duration:
        return Duration(to_millis(text, name=name))

    def to_timedelta(self) -> timedelta:
        return timedelta(milliseconds=self.millis)

    def __str__(self) -> str:
        return f"{self.millis} ms"


DurationLike = int | timedelta | str | Duration
"""What the API edge accepts for a duration: milliseconds, ``timedelta``, ``"10 s"``, :class:`Duration`."""


def epoch_millis(value: object) -> int:
    """A time a user function gave (an assigner's timestamp, a punctuated watermark): an integer (a
    numpy one too), or a finite float truncated toward zero, in the signed 64-bit range. Anything
    else is a ``TypeError`` (not a number: a string, a bool, None, NaN), and a number past 64 bits a
    ``ValueError``; each caller says what it was in its own words.

    >>> epoch_millis(1_500.7)
    1500
    >>> epoch_millis(2**63)
    Traceback (most recent call last):
    ...
    ValueError: 9223372036854775808 is past the signed 64-bit range of epoch milliseconds
    """
    if type(value) is int and MIN_TIMESTAMP <= value <= MAX_TIMESTAMP:  # the common case, once a record
        return value
    integral = isinstance(value, numbers.Integral)
    if isinstance(value, bool) or not (integral or (isinstance(value, numbers.Real) and math.isfinite(value))):
        raise TypeError(f"{value!r} ({type(value).__name__}) is not a number of epoch milliseconds")
    t: int = int(value)  # type: ignore[call-overload]
    if not MIN_TIMESTAMP <= t <= MAX_TIMESTAMP:
        raise ValueError(f"{value!r} is past the signed 64-bit range of epoch milliseconds")
    return t


def timer_time(timestamp: object) -> int:
    """A timer's time as given to ``register_*_timer``/``delete_*_timer``: an integer of epoch
    milliseconds in the 64-bit range (a numpy integer too), or a ``TypeError``/``ValueError``
    saying what it got. Flink's timers take a Java ``long``; a float was truncated here, a
    string or a bool taken as a number, a time past ``Long.MAX_VALUE`` kept as a timer that
    never fires (not even at the end of input), and one below ``Long.MIN_VALUE`` fired with a
    timestamp no record can have.

    >>> timer_time(1_500)
    1500
    >>> timer_time(1500.7)
    Traceback (most recent call last):
    ...
    TypeError: a timer's time must be an integer of epoch milliseconds, got 1500.7 (float)
    """
    if type(timestamp) is int and MIN_TIMESTAMP <= timestamp <= MAX_TIMESTAMP:
        return timestamp  # the common case, once per element for a window's trigger: no ABC check
    if isinstance(timestamp, bool) or not isinstance(timestamp, numbers.Integral):
        raise TypeError(f"a timer's time must be an integer of epoch milliseconds, got {timestamp!r} "
                        f"({type(timestamp).__name__})")
    t = int(timestamp)
    if not MIN_TIMESTAMP <= t <= MAX_TIMESTAMP:
        raise ValueError(f"a timer's time must be within the 64-bit range of epoch milliseconds "
                         f"[-2**63, 2**63 - 1], got {t}")
    return t


def to_millis(value: DurationLike, *, name: str = "duration") -> int:
    """Convert a duration to integer milliseconds.

    ``int`` is taken as milliseconds. ``timedelta`` must be a whole number of
    milliseconds. Strings are ``"<number> <unit>"`` with units ms, s, min, h, d
    (and their long forms); a bare number is milliseconds.

    Raises :class:`ConfigurationError` naming ``name`` when the value cannot be read, or is
    beyond Java's ``long`` milliseconds (``2**63 - 1``), where Flink's ``Time`` ends: a window of
    ``300000000000 d`` dead-lettered every record, each with a reason of its own.
    """
    ms = _to_millis(value, name)
    if not MIN_TIMESTAMP < ms <= MAX_TIMESTAMP:
        raise ConfigurationError(name, f"{value!r} is {ms} ms, beyond the 64-bit milliseconds Flink's durations "
                                       f"have (at most {MAX_TIMESTAMP})")
    return ms


def _to_millis(value: DurationLike, name: str) -> int:
    if isinstance(value, Duration):
        return value.millis
    if isinstance(value, bool):
        raise ConfigurationError(name, f"expected a duration, got the bool {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        if micros % 1000:
            raise ConfigurationError(name, f"{value!r} is not a whole number of milliseconds")
        return micros // 1000
    if isinstance(value, str):
        m = _DURATION_RE.match(value)
        unit = m.group(2).lower() if m else ""
        if not m or (unit and unit not in _UNITS_MS):
            raise ConfigurationError(
                name,
                f"cannot read {value!r} as a duration; write e.g. '200 ms', '10 seconds', "
                "'5 min', '1 hour' or an integer number of milliseconds",
            )
        number = Fraction(m.group(1)) * _UNITS_MS[unit or "ms"]
        if number.denominator != 1:
            raise ConfigurationError(name, f"{value!r} is not a whole number of milliseconds")
        return int(number)
    raise ConfigurationError(
        name, f"expected milliseconds (int), timedelta, str or Duration, got {type(value).__name__}"
    )
