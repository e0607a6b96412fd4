"""Declared field types: what a log record's value fields are read as, one meaning each.

A source declares its element's fields as ``[(name, type), ...]`` with Spark SQL type
names. Both runtimes read a record's ``value`` object through :func:`read_element`, so
they see the same element and reject the same records:

============ ========================================== ===================================
declared     the JSON value it accepts                  the element gets
============ ========================================== ===================================
``STRING``   a string                                   ``str``
``BIGINT``   an integer in the signed 64-bit range      ``int`` (also ``INT``, ``SMALLINT``,
                                                        ``TINYINT`` with their ranges)
``DOUBLE``   a number                                   ``float`` (also ``FLOAT``)
``BOOLEAN``  ``true`` or ``false``                      ``bool``
``TIMESTAMP`` an ISO-8601 date-time string; without a   ``int``: epoch **milliseconds**,
             zone offset it is UTC                      sub-millisecond digits floored
``DATE``     an ISO-8601 date string ``YYYY-MM-DD``     ``int``: epoch milliseconds of its
                                                        midnight UTC
============ ========================================== ===================================

Time is integer milliseconds everywhere in lowwater, so a ``TIMESTAMP`` or ``DATE`` field
arrives as epoch milliseconds and ``with_timestamp_assigner("field")`` means the same
instant on every runtime and path. A field that is absent or ``null`` is ``None``. A
present value of another kind (``"7"`` for a ``BIGINT``, ``1.5`` for a ``BIGINT``, a
number for a ``TIMESTAMP``) makes the record a dead letter, with the field named in the
reason. Fields the record has but the source does not declare are not part of the element.

>>> fields = parse_fields([("user", "string"), ("at", "TIMESTAMP")])
>>> read_element({"user": "ann", "at": "1970-01-01T00:00:01.5009Z", "x": 1}, fields)
{'user': 'ann', 'at': 1500}
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping, Sequence
from typing import Any

from lowwater.core.errors import ConfigurationError

__all__ = ["FIELD_TYPES", "FieldError", "column_type", "parse_fields", "read_element", "read_value"]

_INT_RANGES = {
    "BIGINT": (-(2**63), 2**63 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "TINYINT": (-(2**7), 2**7 - 1),
}
_ALIASES = {"LONG": "BIGINT", "INTEGER": "INT", "SHORT": "SMALLINT", "BYTE": "TINYINT",
            "REAL": "FLOAT", "BOOL": "BOOLEAN"}
FIELD_TYPES: tuple[str, ...] = (*_INT_RANGES, "DOUBLE", "FLOAT", "STRING", "BOOLEAN", "TIMESTAMP", "DATE")
"""The declared types a partitioned log's fields can have (aliases: LONG, INTEGER, ...)."""

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


class FieldError(ValueError):
    """A present value that cannot be read as its field's declared type."""


def parse_fields(value_fields: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """``value_fields`` with canonical type names; an unknown type or a bad name is an error."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for item in value_fields:
        if not (isinstance(item, tuple | list) and len(item) == 2):
            raise ConfigurationError("value_fields", f"each field is a (name, type) pair, got {item!r}")
        name, declared = item
        if not isinstance(name, str) or not name or name.startswith("_"):
            raise ConfigurationError(
                "value_fields", f"field name {name!r} must be a non-empty string not starting with '_' "
                "(lowwater's own columns start with '_')")
        if name in seen:
            raise ConfigurationError("value_fields", f"field {name!r} is declared twice")
        seen.add(name)
        t = str(declared).strip().upper()
        t = _ALIASES.get(t, t)
        if t not in FIELD_TYPES:
            raise ConfigurationError(
                "value_fields", f"field {name!r} has type {declared!r}; a partitioned log's fields are "
                f"one of {', '.join(FIELD_TYPES)}")
        out.append((name, t))
    return out


def column_type(declared: str) -> str:
    """The Spark SQL type of the column a declared field becomes (``TIMESTAMP``/``DATE``: ms)."""
    return "BIGINT" if declared in ("TIMESTAMP", "DATE") else declared


def _millis(t: _dt.datetime) -> int:
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    d = t - _EPOCH
    return (d.days * 86_400 + d.seconds) * 1000 + d.microseconds // 1000


def _encodes(text: str) -> bool:
    """Whether ``text`` is valid Unicode (JSON's ``"\\ud800"`` escape makes a lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_value(value: Any, declared: str) -> Any:
    """``value`` read as ``declared`` (canonical); ``None`` stays ``None``.

    Raises
    ------
    FieldError
        The value is of another kind or out of range.
    """
    if value is None:
        return None
    if declared in _INT_RANGES:
        lo, hi = _INT_RANGES[declared]
        if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
            return value
    elif declared in ("DOUBLE", "FLOAT"):
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                f = float(value)
            except OverflowError:  # an integer beyond every float
                f = math.nan
            if math.isfinite(f) and (declared == "DOUBLE" or abs(f) <= 3.4028234663852886e38):
                return f
    elif declared == "STRING":
        if isinstance(value, str) and (value.isascii() or _encodes(value)):
            return value
    elif declared == "BOOLEAN":
        if isinstance(value, bool):
            return value
    elif declared == "TIMESTAMP":
        if isinstance(value, str):
            try:
                return _millis(_dt.datetime.fromisoformat(value))
            except ValueError:
                pass
    elif declared == "DATE":
        try:
            if isinstance(value, str) and len(value) == 10:  # YYYY-MM-DD, not the compact forms
                return _millis(_dt.datetime.combine(_dt.date.fromisoformat(value), _dt.time()))
        except ValueError:
            pass
    text = repr(value)
    raise FieldError(f"{text[:60] + '...' if len(text) > 60 else text} is not a {declared}")


def read_element(value: Mapping[str, Any], fields: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The element of a record's ``value`` object: its declared fields, read (see the table).

    Raises
    ------
    FieldError
        A field's value cannot be read as its type; the message names the field.
    """
    out: dict[str, Any] = {}
    for name, declared in fields:
        try:
            out[name] = read_value(value.get(name), declared)
        except FieldError as e:
            raise FieldError(f"field {name!r}: {e}") from None
    return out
