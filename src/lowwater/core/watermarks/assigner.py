"""Timestamp assigners: pull the event timestamp out of an element."""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

from lowwater.core.clock import Clock
from lowwater.core.errors import BadRecordError, ConfigurationError
from lowwater.core.time import MIN_TIMESTAMP, epoch_millis

__all__ = [
    "FieldTimestampAssigner",
    "IngestionTimeAssigner",
    "RecordTimestampAssigner",
    "TimestampAssigner",
    "as_timestamp_assigner",
    "assigned_timestamp",
    "timestamp_or_none",
]

T = TypeVar("T")


class TimestampAssigner(ABC, Generic[T]):
    """``extract_timestamp(element, previous_element_timestamp) -> int`` (epoch ms).

    ``previous_element_timestamp`` is the timestamp the record already carries: the
    source's (for Kafka, the record timestamp), or ``MIN_TIMESTAMP`` when it has none.
    """

    @abstractmethod
    def extract_timestamp(self, element: T, previous_element_timestamp: int) -> int: ...


def timestamp_or_none(previous: int | None, assigned: int) -> int | None:
    """The timestamp a record carries after its assigner: ``assigned``, or ``None`` where the record
    had none (``previous``) and the assigner gave Flink's no-timestamp marker back (as
    :class:`RecordTimestampAssigner` does). An event-time window dead-letters both a ``None`` and a
    ``Long.MIN_VALUE``, with reasons that tell them apart (:meth:`BadRecordError.no_timestamp`), as the
    native path's SQL does from the source's null.

    >>> [timestamp_or_none(prev, ts) for prev, ts in [(None, MIN_TIMESTAMP), (MIN_TIMESTAMP, MIN_TIMESTAMP), (None, 5)]]
    [None, -9223372036854775808, 5]
    """
    return None if previous is None and assigned == MIN_TIMESTAMP else assigned


def assigned_timestamp(value: object, assigner: object) -> int:
    """What ``assigner`` returned, as a timestamp: an integer in the 64-bit range, or a finite
    float truncated toward zero, as :class:`FieldTimestampAssigner` takes a field's value. Anything
    else raises :class:`~lowwater.core.errors.BadRecordError` naming the assigner and the value, so
    the record is dead-lettered as one whose field holds it would be: ``None`` or NaN, a string (an
    assigner returning a field of text: ``"1000"`` was read as 1,000 ms), a bool (``True`` was 1 ms),
    or a number past 64 bits (the Spark paths failed their query putting it in a column). Until
    session 63 the engines called ``int()`` on it, and failed the job for ``None`` with ``int()``'s
    own message (a user probe).

    >>> assigned_timestamp(1_000.9, "f")
    1000
    >>> assigned_timestamp("1000", "f")
    Traceback (most recent call last):
    ...
    lowwater.core.errors.BadRecordError: missing or non-numeric timestamp (f returned '1000')
    """
    try:
        return epoch_millis(value)
    except TypeError:
        raise BadRecordError(BadRecordError.missing_timestamp(f"{assigner} returned {value!r}"[:200])) from None
    except ValueError:
        raise BadRecordError(BadRecordError.out_of_range(f"{assigner} returned it", value)) from None


class RecordTimestampAssigner(TimestampAssigner[Any]):
    """Keeps the timestamp the source attached to the record."""

    def extract_timestamp(self, element: Any, previous_element_timestamp: int) -> int:
        return previous_element_timestamp


class IngestionTimeAssigner(TimestampAssigner[Any]):
    """Ingestion time: the clock when the record enters, kept non-decreasing."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.max_timestamp = MIN_TIMESTAMP

    def extract_timestamp(self, element: Any, previous_element_timestamp: int) -> int:
        now = self.clock.now_ms()
        if now > self.max_timestamp:
            self.max_timestamp = now
        return self.max_timestamp


class FieldTimestampAssigner(TimestampAssigner[Any]):
    """The timestamp is the integer field ``field`` of the element (dict key or attribute).

    Engines read it as a column, with no Python per row. A record whose field is missing,
    null, not a number, NaN or infinite, beyond the 64-bit millisecond range, or equal to
    ``Long.MIN_VALUE`` (Flink's "no timestamp" marker) raises
    :class:`~lowwater.core.errors.BadRecordError`: it goes to the dead-letter output. A
    float is truncated toward zero, like Spark's ``CAST(ts AS BIGINT)``. Negative
    timestamps (before 1970) are valid.
    """

    def __init__(self, field: str) -> None:
        self.field = field

    def extract_timestamp(self, element: Any, previous_element_timestamp: int) -> int:
        if isinstance(element, dict):
            v = element.get(self.field)
        else:
            v = getattr(element, self.field, None)
        try:
            ts = epoch_millis(v)
        except TypeError:
            raise BadRecordError(BadRecordError.missing_timestamp(self.field)) from None
        except ValueError:
            raise BadRecordError(BadRecordError.out_of_range(self.field, v)) from None
        if ts == MIN_TIMESTAMP:
            raise BadRecordError(BadRecordError.no_timestamp_marker(self.field))
        return ts

    def __repr__(self) -> str:
        return f"FieldTimestampAssigner({self.field!r})"


class _CallableAssigner(TimestampAssigner[T]):
    def __init__(self, fn: Callable[..., int], arity: int) -> None:
        self.fn = fn
        self.arity = arity

    def extract_timestamp(self, element: T, previous_element_timestamp: int) -> int:
        if self.arity == 1:
            return self.fn(element)
        return self.fn(element, previous_element_timestamp)

    def __repr__(self) -> str:
        return f"TimestampAssigner({getattr(self.fn, '__qualname__', self.fn)!r})"


def as_timestamp_assigner(
    assigner: TimestampAssigner[T] | Callable[[T, int], int] | Callable[[T], int] | str,
) -> TimestampAssigner[T]:
    """Accept an assigner, a field name, or a function of ``(element, previous_ts)`` or ``(element)``."""
    if isinstance(assigner, TimestampAssigner):
        return assigner
    if isinstance(assigner, str):
        return FieldTimestampAssigner(assigner)
    if not callable(assigner):
        raise ConfigurationError(
            "timestamp_assigner",
            f"expected a TimestampAssigner or a function (element, previous_ts) -> int, "
            f"got {type(assigner).__name__}",
        )
    arity = 2
    try:
        params = [
            p for p in inspect.signature(assigner).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
        if len(params) == 1:
            arity = 1
    except (TypeError, ValueError):
        pass
    return _CallableAssigner(cast(Callable[..., int], assigner), arity)
