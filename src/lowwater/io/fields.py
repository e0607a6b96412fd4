"""Declared field types: what a log record's value fields are read as, one meaning each.

A source declares its element's fields as ``[(name, type), ...]`` with Spark SQL type
names. Both runtimes read a record's ``value`` object through :func:`read_element`, so
they see the same element and reject the same records:

================ ========================================== ===================================
declared         the JSON value it accepts                  the element gets
================ ========================================== ===================================
``STRING``       a string                                   ``str``
``BIGINT``       an integer in the signed 64-bit range      ``int`` (also ``INT``, ``SMALLINT``,
                                                            ``TINYINT`` with their ranges)
``DOUBLE``       a number                                   ``float`` (also ``FLOAT``)
``BOOLEAN``      ``true`` or ``false``                      ``bool``
``DECIMAL(p,s)`` a number with at most ``s`` places and     ``Decimal`` of ``s`` places, exact
                 ``p - s`` integer digits (``10.5`` or      (``DECIMAL(p)``: ``s`` is 0;
                 ``1e3`` for ``DECIMAL(10,2)``; not         ``DECIMAL``: ``DECIMAL(10,0)``, as
                 ``10.505`` or ``"10.50"``)                 in Spark; ``NUMERIC`` alike)
``TIMESTAMP``    an ISO-8601 date-time string of the form   ``int``: epoch **milliseconds**,
                 :data:`TIMESTAMP_TEXT`; without a zone     sub-millisecond digits floored
                 offset it is UTC
``DATE``         an ISO-8601 date string ``YYYY-MM-DD``     ``int``: epoch milliseconds of its
                                                            midnight UTC
================ ========================================== ===================================

A ``DECIMAL`` is read from the number's text, never through a float (which keeps 15 to 17
significant digits), and never rounded: a value with more places than the type has is a dead
letter. Where a source declares a ``DECIMAL``, the log decodes its JSON numbers that are not
integers as ``Decimal`` (:func:`decode_json`), which the other types read as the float
``json.loads`` makes.

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
import decimal
import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from lowwater.core.errors import ConfigurationError, article

TIMESTAMP_TEXT = (r"(?!0000)[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}(?::[0-9]{2})?|[T ][0-9]{2}:[0-9]{2}:[0-9]{2}"
                  r"(?:\.[0-9]*)?(?:Z|[+-](?:(?:0[0-9]|1[0-7])(?::?[0-5][0-9])?|18(?::?00)?))?)?")
"""The text a ``TIMESTAMP`` field reads (a regular expression, matched whole, of Python's and Java's
syntax alike): ``YYYY-MM-DD``, then optionally ``T`` or a space and ``hh``, ``hh:mm`` or
``hh:mm:ss``, the last with optional fraction digits and a zone: ``Z``, or ``+``/``-`` and ``hh``,
``hhmm`` or ``hh:mm`` up to 18 hours. These are the ISO-8601 forms Python's ``fromisoformat`` and
Spark's JSON reader (the Kafka source's) both read, to the same instant; outside them they differ
(Python 3.11 takes ``20240101T000000``, ``2024-W01-1`` and any separator character, and Python 3.10
takes fewer; Spark takes ``5000`` as the year 5000, ``2024-1-1`` and ``... UTC``), so a record's
reading would depend on its source and the Python it runs on: those are dead letters everywhere."""

DATE_TEXT = r"(?!0000)[0-9]{4}-[0-9]{2}-[0-9]{2}"
"""The text a ``DATE`` field reads: ``YYYY-MM-DD`` (not the week date ``2024-W01-1``, of as many
characters; not a date-time, which Spark's reader would cut to its date)."""

__all__ = [
    "DATE_TEXT",
    "FIELD_TYPES",
    "JSON_DECODER",
    "TIMESTAMP_TEXT",
    "FieldError",
    "column_type",
    "decimal_type",
    "decode_json",
    "has_decimals",
    "is_decimal",
    "parse_fields",
    "read_element",
    "read_value",
]

_INT_RANGES = {
    "BIGINT": (-(2**63), 2**63 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "TINYINT": (-(2**7), 2**7 - 1),
}
_ALIASES = {"LONG": "BIGINT", "INTEGER": "INT", "SHORT": "SMALLINT", "BYTE": "TINYINT",
            "REAL": "FLOAT", "BOOL": "BOOLEAN"}
FIELD_TYPES: tuple[str, ...] = (*_INT_RANGES, "DOUBLE", "FLOAT", "STRING", "BOOLEAN", "TIMESTAMP", "DATE",
                                 "DECIMAL(p,s)")
"""The declared types a partitioned log's fields can have (aliases: LONG, INTEGER, ...)."""

_DECIMAL = re.compile(r"(?:DECIMAL|NUMERIC|DEC)(?:\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?")
_WIDE = decimal.Context(prec=80, rounding=decimal.ROUND_HALF_EVEN)
"""Room for any DECIMAL(38, s) value and its quantizing (the default context keeps 28 digits)."""
_BOUNDS: dict[tuple[int, int], tuple[decimal.Decimal, decimal.Decimal]] = {}
"""Per DECIMAL(p, s): the exponent of its last place, and 10 ** (p - s), which its values stay under."""


JSON_DECODER = json.JSONDecoder(parse_float=decimal.Decimal)
"""The decoder of the log's JSON where a field is a DECIMAL: numbers that are not integers as
``Decimal``, exactly as written (it parses faster than floats, too)."""


def decode_json(text: str) -> Any:
    """``json.loads(text)``, its numbers that are not integers as ``Decimal`` (:data:`JSON_DECODER`)."""
    if text.startswith("\ufeff"):  # as json.loads says it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return JSON_DECODER.decode(text)


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
        if _DECIMAL.fullmatch(t):
            t = _canonical_decimal(name, declared, t)
        elif t not in FIELD_TYPES:
            raise ConfigurationError(
                "value_fields", f"field {name!r} has type {declared!r}; a partitioned log's fields are "
                f"one of {', '.join(FIELD_TYPES)}")
        out.append((name, t))
    return out


def _canonical_decimal(name: str, declared: Any, t: str) -> str:
    m = _DECIMAL.fullmatch(t)
    assert m is not None
    precision = int(m.group(1) or 10)
    scale = int(m.group(2) or 0)
    if not (1 <= precision <= 38 and scale <= precision):
        raise ConfigurationError(
            "value_fields", f"field {name!r} has type {declared!r}; a DECIMAL(p,s) has 1 <= p <= 38 and s <= p")
    return f"DECIMAL({precision},{scale})"


def has_decimals(fields: Sequence[tuple[str, str]]) -> bool:
    """Whether any of ``fields`` (canonical) is a DECIMAL: the log then decodes exact numbers."""
    return any(t.startswith("DECIMAL(") for _, t in fields)


def is_decimal(declared: str) -> bool:
    """Whether ``declared`` (upper case) names a DECIMAL: ``DECIMAL``, ``DECIMAL(p)``, ``NUMERIC(p,s)``..."""
    return _DECIMAL.fullmatch(declared) is not None


@functools.lru_cache(maxsize=256)
def decimal_type(declared: str) -> tuple[int, int] | None:
    """``(precision, scale)`` of a canonical ``DECIMAL(p,s)``; None for another type (cached: it
    is asked once per value read)."""
    if not declared.startswith("DECIMAL("):
        return None
    p, s = declared[8:-1].split(",")
    return int(p), int(s)


def _read_decimal(value: Any, precision: int, scale: int) -> decimal.Decimal | None:
    """``value`` as a DECIMAL(precision, scale) exactly, or None (see the table)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        exact = decimal.Decimal(value)
    elif isinstance(value, decimal.Decimal):
        exact = value
    elif isinstance(value, float):  # not decoded by decode_json: read as its repr
        if not math.isfinite(value):
            return None
        exact = decimal.Decimal(repr(value))
    else:
        return None
    if not exact.is_finite() or exact.adjusted() >= precision - scale:
        return None  # NaN, an infinity, or too many integer digits (1e999999999 would not quantize)
    bounds = _BOUNDS.get((precision, scale))
    if bounds is None:
        bounds = _BOUNDS[(precision, scale)] = (decimal.Decimal(1).scaleb(-scale),
                                                decimal.Decimal(10) ** (precision - scale))
    quantized = _WIDE.quantize(exact, bounds[0])
    if quantized != exact or not -bounds[1] < quantized < bounds[1]:
        return None
    return quantized


def column_type(declared: str) -> str:
    """The Spark SQL type of the column a declared field becomes (``TIMESTAMP``/``DATE``: ms)."""
    return "BIGINT" if declared in ("TIMESTAMP", "DATE") else declared


_TIMESTAMP = re.compile(TIMESTAMP_TEXT, re.ASCII)
_DATE = re.compile(DATE_TEXT, re.ASCII)


def _timestamp_millis(text: str) -> int:
    """Epoch milliseconds of a :data:`TIMESTAMP_TEXT` (matched), read field by field, the same on every
    Python (3.10's ``fromisoformat`` reads neither ``Z`` nor most fractions); raises ``ValueError``
    for a field out of its range, as ``datetime`` does."""
    hour = minute = second = micro = 0
    zone = _dt.timezone.utc
    time = text[11:]
    if time:
        hour = int(time[:2])
        if len(time) > 2:
            minute = int(time[3:5])
        if len(time) > 5:
            second, rest = int(time[6:8]), time[8:]
            if rest.startswith("."):
                digits = len(rest) - len(rest[1:].lstrip("0123456789"))
                micro, rest = int((rest[1:digits] + "000000")[:6]), rest[digits:]
            if rest and rest != "Z":
                minutes = int(rest[1:3]) * 60 + (int(rest[-2:]) if len(rest) > 3 else 0)
                zone = _dt.timezone(_dt.timedelta(minutes=-minutes if rest[0] == "-" else minutes))
    return _millis(_dt.datetime(int(text[:4]), int(text[5:7]), int(text[8:10]), hour, minute, second, micro,
                                tzinfo=zone))


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
        if isinstance(value, int | float | decimal.Decimal) and not isinstance(value, bool):
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
        if isinstance(value, str) and _TIMESTAMP.fullmatch(value):
            try:
                return _timestamp_millis(value)
            except ValueError:  # a month, day, hour, minute or second out of its range
                pass
    elif declared == "DATE":
        try:
            if isinstance(value, str) and _DATE.fullmatch(value):  # YYYY-MM-DD, not the compact forms
                return _millis(_dt.datetime.combine(_dt.date.fromisoformat(value), _dt.time()))
        except ValueError:
            pass
    elif declared.startswith("DECIMAL("):
        places = decimal_type(declared)
        d = None if places is None else _read_decimal(value, *places)
        if d is not None:
            return d
    # a DECIMAL's reason quotes the number as written; another type's, as json.loads's float (as
    # the reason is worded whether or not the source has a DECIMAL field)
    text = repr(value) if not isinstance(value, decimal.Decimal) else \
        str(value) if declared.startswith("DECIMAL(") else repr(float(value))
    raise FieldError(f"{text[:60] + '...' if len(text) > 60 else text} is not {article(declared)} {declared}")


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
