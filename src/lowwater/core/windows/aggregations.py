"""Built-in aggregate functions: sum, count, min, max, avg of a value.

Each takes the value to aggregate as a field name (dict key or attribute) or a function.
``builtin_aggregate("sum", "value")`` builds one by name.
"""

from __future__ import annotations

import decimal
import numbers
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from lowwater.core.errors import BadRecordError, ConfigurationError
from lowwater.core.windows.functions import AggregateFunction

__all__ = ["BUILTIN_AGGREGATES", "Avg", "BuiltinAggregate", "Count", "Max", "Min", "Sum", "builtin_aggregate"]

ValueOf = str | Callable[[Any], Any] | None


def _getter(value: ValueOf) -> Callable[[Any], Any]:
    if value is None:
        return lambda e: e
    if callable(value):
        return value
    field = value
    reason = BadRecordError.missing("value", field)

    def get(e: Any) -> Any:
        v = e.get(field) if isinstance(e, dict) else getattr(e, field, None)
        if v is None:
            raise BadRecordError(reason)
        return v

    return get


class BuiltinAggregate(AggregateFunction[Any, Any, Any]):
    """A built-in aggregate: ``name`` and ``field`` let an engine run it natively."""

    name: str = ""
    numeric: bool = False
    """Whether values must be numbers (sum, avg)."""

    def __init__(self, value: ValueOf = None) -> None:
        self.field = value if isinstance(value, str) else None
        self.value_of = _getter(value)

    def check(self, element: Any) -> None:
        """Raise :class:`BadRecordError` if ``element`` has no value this aggregate can take
        (a missing or null field; a non-number for sum and avg). Engines call it before the
        element touches any window, so a bad record leaves no trace in the state."""
        if self.field is None:
            return
        v = self.value_of(element)
        if self.numeric and (isinstance(v, bool) or not isinstance(v, numbers.Number)):
            raise BadRecordError(BadRecordError.non_numeric(self.field, v))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.field!r})" if self.field else f"{type(self).__name__}()"


_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
"""Where a sum of Decimals is exact, as Java's ``BigDecimal.add`` (Flink's ``SumAggregator``) and
the native path's ``DECIMAL`` sum are: Python's default context keeps 28 significant digits, and
rounded ``12345678901.123456789012345678 + 1.000000000000000001`` to ``...12345678901234568`` on
the reference runtime, the keyed and the general paths (a user probe, session 65)."""


def _add(a: Any, b: Any) -> Any:
    """``a + b``, exactly where either is a Decimal (:data:`_EXACT`)."""
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return _EXACT.add(a, b)
    return a + b


def _plus(a: Any, b: Any) -> Any:
    """``a + b``; two integers wrap to the signed 64-bit range, as Java's ``long`` (and so
    Flink's ``SumAggregator`` on a ``long`` field) does: ``(2**63 - 1) + 1 == -2**63``."""
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and not isinstance(b, bool):
        return ((a + b + 2**63) % 2**64) - 2**63
    return _add(a, b)


class Sum(BuiltinAggregate):
    """The sum of the values. Integer sums wrap like Java's ``long``, on every path."""

    name = "sum"
    numeric = True

    def create_accumulator(self) -> Any:
        return None

    def add(self, value: Any, accumulator: Any) -> Any:
        v = self.value_of(value)
        return v if accumulator is None else _plus(accumulator, v)

    def get_result(self, accumulator: Any) -> Any:
        return 0 if accumulator is None else accumulator

    def merge(self, a: Any, b: Any) -> Any:
        return b if a is None else a if b is None else _plus(a, b)


class Count(BuiltinAggregate):
    """The number of elements."""

    name = "count"

    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Any, accumulator: int) -> int:
        return accumulator + 1

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, a: int, b: int) -> int:
        return a + b


def _above(a: Any, b: Any) -> bool:
    """``a > b``, with a float NaN above every other value and equal to a NaN, as Java's
    ``Double.compareTo`` orders them (Flink's ``max``/``min`` aggregators) and Spark's ``max`` and
    ``min`` do (the native path). Python's ``>`` is False both ways with a NaN, so the result
    depended on where in the window the NaN came."""
    if a != a:  # a NaN (only a NaN is not equal to itself)
        return bool(b == b)
    return bool(a > b)


class Min(BuiltinAggregate):
    """The smallest value."""

    name = "min"

    def create_accumulator(self) -> Any:
        return None

    def add(self, value: Any, accumulator: Any) -> Any:
        v = self.value_of(value)
        return v if accumulator is None or _above(accumulator, v) else accumulator

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, a: Any, b: Any) -> Any:
        return b if a is None else a if b is None else b if _above(a, b) else a


class Max(BuiltinAggregate):
    """The largest value."""

    name = "max"

    def create_accumulator(self) -> Any:
        return None

    def add(self, value: Any, accumulator: Any) -> Any:
        v = self.value_of(value)
        return v if accumulator is None or _above(v, accumulator) else accumulator

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, a: Any, b: Any) -> Any:
        return b if a is None else a if b is None else b if _above(b, a) else a


class Avg(BuiltinAggregate):
    """The arithmetic mean, as a float (``None`` for an empty window); of ``Decimal`` values, their
    exact sum as a float divided by the count."""

    name = "avg"
    numeric = True

    def create_accumulator(self) -> list[Any]:
        return [0, 0]

    def add(self, value: Any, accumulator: list[Any]) -> list[Any]:
        accumulator[0] = _add(accumulator[0], self.value_of(value))
        accumulator[1] += 1
        return accumulator

    def get_result(self, accumulator: list[Any]) -> float | None:
        if not accumulator[1]:
            return None
        total = accumulator[0]
        # a sum of Decimals or ints (exact) as a float, then divided: what the native path computes
        # from its exact total, CAST(total AS DOUBLE) / n, so every path gives the same float
        mean: float = (float(total) if isinstance(total, Decimal | int) else total) / accumulator[1]
        return mean

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        return [_add(a[0], b[0]), a[1] + b[1]]


BUILTIN_AGGREGATES: dict[str, type[BuiltinAggregate]] = {
    "sum": Sum, "count": Count, "min": Min, "max": Max, "avg": Avg,
}


def builtin_aggregate(name: str, value: ValueOf = None) -> BuiltinAggregate:
    """The built-in aggregate called ``name`` (sum, count, min, max, avg) of ``value``."""
    try:
        cls = BUILTIN_AGGREGATES[name]
    except KeyError:
        raise ConfigurationError(
            "aggregate", f"unknown aggregate {name!r}; use one of {sorted(BUILTIN_AGGREGATES)}"
        ) from None
    if value is not None and not isinstance(value, str) and not callable(value):
        # PyFlink's sum(2), a tuple's position: it failed at the first element, "attribute name must be string"
        raise ConfigurationError(
            "field", f"{name}({value!r}): give the field's name ({name}(\"amount\")) or a function of the "
                     f"element ({name}(lambda e: e[{value!r}])); lowwater's elements have named fields")
    return cls(value)
