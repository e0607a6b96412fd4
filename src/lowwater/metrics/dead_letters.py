"""What the dead-letter output received, in a form a person can read at a glance.

Each batch's metrics line carries the main reasons its dead letters had and one sample,
so ``lowwater run`` and ``lowwater status`` can say *why* records were rejected even when
no dead-letter sink was configured. The reasons are grouped by their kind: the reason up
without the record's own text (``record does not parse: '{"ts": ...'`` -> ``record does not parse``)::

    >>> summarize_dead([{"reason": "missing key (user)", "partition": 0, "offset": 7, "record": {"ts": 1}}])
    {'dead_letter_reasons': {'missing key (user)': 1}, 'dead_letter_sample': {'reason': 'missing key (user)', \
'partition': 0, 'offset': 7, 'record': '{"ts": 1}'}}
"""

from __future__ import annotations

import base64
import json
import math
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

__all__ = [
    "describe_reasons",
    "exact_json",
    "letter_from_json",
    "letter_json",
    "merge_reasons",
    "reason_kind",
    "record_json",
    "sample_place",
    "spark_json",
    "summarize_dead",
]

TOP_REASONS = 5
SAMPLE_CHARS = 300


def summarize_dead(rows: Iterable[Mapping[str, Any]], top: int = TOP_REASONS) -> dict[str, Any]:
    """``{"dead_letter_reasons": {reason: count} (the ``top`` most frequent), "dead_letter_sample": {...}}``,
    or ``{}`` when there are no dead letters. The sample is the first letter's reason, partition,
    offset and record, and its ``source`` where the letters name one (a job of several sources)."""
    counts: Counter[str] = Counter()
    sample: dict[str, Any] | None = None
    for row in rows:
        reason = str(row.get("reason") or "no reason given")
        counts[reason_kind(reason)] += 1
        if sample is None:
            record = row.get("record")
            # None for a record that did not parse (it has no fields), not the text "null"
            text = record if isinstance(record, str) or record is None else \
                json.dumps(record, default=str, sort_keys=True)
            sample = {"reason": reason, "partition": row.get("partition"), "offset": row.get("offset"),
                      "record": text[:SAMPLE_CHARS] if text is not None else None,
                      **({"source": row["source"]} if row.get("source") is not None else {})}
    if not counts:
        return {}
    return {"dead_letter_reasons": dict(counts.most_common(top)), "dead_letter_sample": sample}


_FIELD_ERROR = re.compile(r"(field '.*?'): .* (is not an? [A-Z].*)$", re.S)


def reason_kind(reason: str) -> str:
    """A reason without the record's own details, so that a batch's reasons group by kind.

    >>> reason_kind("missing key (user)")
    'missing key (user)'
    >>> reason_kind("non-numeric value (amount): 'x'")
    'non-numeric value (amount)'
    >>> from lowwater.core.errors import BadRecordError
    >>> reason_kind(BadRecordError.unparsed("field 'ts': 'NaN' is not a BIGINT"))
    "record does not parse (field 'ts' is not a BIGINT)"
    >>> reason_kind(BadRecordError.unparsed("invalid JSON (Expecting value: line 1 column 1 (char 0)): 'x'"))
    'record does not parse (invalid JSON)'

    The reader's own reason inside ``record does not parse: '...'`` (Python's repr of it) gives
    its kind too, where all of them were one ``record does not parse``; a colon inside
    parentheses does not cut (``invalid JSON (Expecting value`` was a kind)."""
    field = _FIELD_ERROR.match(reason)
    if field:
        return f"{field[1]} {field[2]}"
    head, _, rest = reason.partition(": ")
    if head.count("(") > head.count(")"):
        head = head.split(" (", 1)[0]
    if head == "record does not parse" and rest:
        import ast

        try:
            inner = ast.literal_eval(rest)
        except (ValueError, SyntaxError):
            return head
        if isinstance(inner, str) and inner:
            return f"{head} ({reason_kind(inner)})"
    return head


def merge_reasons(lines: Sequence[Mapping[str, Any]], top: int = TOP_REASONS) -> dict[str, int]:
    """The most frequent reasons over several metrics lines."""
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update({str(k): int(v) for k, v in (line.get("dead_letter_reasons") or {}).items()})
    return dict(counts.most_common(top))


def describe_reasons(reasons: Mapping[str, int]) -> str:
    """``missing key (user) x3, record does not parse: 'x' x1``"""
    return ", ".join(f"{reason} x{n}" for reason, n in reasons.items())


# -- a dead letter through JSON, and its record as a DataFrame's text ------------------------------
_TAGS: dict[str, Callable[[str], Any]] = {"\x00decimal": Decimal, "\x00bytes": base64.b64decode}
"""A Decimal or bytes value inside a letter carried as JSON text between processes (a key no
record's dict has), so that it comes back as the value it was: ``default=str`` made a Decimal
text and bytes their repr, on the keyed path only."""


def _tagged(o: Any) -> Any:
    if isinstance(o, Decimal):
        return {"\x00decimal": str(o)}
    if isinstance(o, (bytes, bytearray)):
        return {"\x00bytes": base64.b64encode(o).decode("ascii")}
    return str(o)


def _untagged(d: dict[str, Any]) -> Any:
    if len(d) == 1:
        (k, v), = d.items()
        back = _TAGS.get(k)
        if back is not None:
            return back(v)
    return d


def letter_json(letter: Mapping[str, Any]) -> str:
    """A dead letter as JSON text that :func:`letter_from_json` reads back with its values' types:
    Decimals and bytes too (other values JSON has no kind for become their text)."""
    return json.dumps(letter, default=_tagged)


def letter_from_json(text: str | bytes) -> dict[str, Any]:
    """The dead letter :func:`letter_json` wrote."""
    return dict(json.loads(text, object_hook=_untagged))


_MARK = f"lowwater-number-{uuid.uuid4().hex}-"
_MARKED = re.compile(f'"{_MARK}([0-9]+)"')


def record_json(record: Any) -> str:
    """A dead letter's record as the native path's ``to_json`` writes it, whichever path rejected
    it: compact, a dict without its null fields (as a struct), and values as :func:`spark_json`."""
    if isinstance(record, dict):
        record = {k: v for k, v in record.items() if v is not None}
    return spark_json(record)


def _finite(o: Any) -> Any:
    """``o`` with every infinite or NaN float as the text Spark's JSON writer gives it."""
    if isinstance(o, float) and not math.isfinite(o):
        return "NaN" if o != o else ("Infinity" if o > 0 else "-Infinity")
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def spark_json(value: Any) -> str:
    """``value`` as compact JSON text, as Spark writes a row: bytes in base64, a finite Decimal as a
    JSON number with its places (``1.50``, not ``"1.50"``), an infinite or NaN float as the string
    ``"Infinity"``, ``"-Infinity"`` or ``"NaN"`` (bare ``Infinity`` is no JSON); a value JSON has no
    kind for is its text.

    >>> spark_json({"d": Decimal("1.50"), "f": float("inf"), "b": b"hi"})
    '{"d":1.50,"f":"Infinity","b":"aGk="}'
    """
    def other(o: Any) -> Any:
        return base64.b64encode(o).decode("ascii") if isinstance(o, (bytes, bytearray)) else str(o)

    return exact_json(_finite(value), other)


def exact_json(value: Any, other: Callable[[Any], Any] | None = None, allow_nan: bool = True) -> str:
    """``value`` as compact JSON text, a finite Decimal in it a JSON number with exactly its digits
    (``json`` has no way to write one: a marker stands in for it, then its digits replace the
    marker); ``other`` gives any other value JSON has no kind for (by default ``TypeError``)."""
    numbers: list[str] = []

    def default(o: Any) -> Any:
        if isinstance(o, Decimal) and o.is_finite():
            numbers.append(format(o, "f"))
            return f"{_MARK}{len(numbers) - 1}"
        if other is None:
            raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")
        return other(o)

    text = json.dumps(value, separators=(",", ":"), default=default, allow_nan=allow_nan)
    return _MARKED.sub(lambda m: numbers[int(m.group(1))], text) if numbers else text


def sample_place(sample: Mapping[str, Any]) -> str:
    """Where a dead-letter sample was read: ``partition 3 offset 7``, or in a job of several sources
    ``partition clicks:3 offset 7`` (the source's label, as the watermarks' table names partitions),
    or ``partition 3`` for a source without offsets (a ``DataFrameSource`` given none: it said
    ``offset None``)."""
    source = sample.get("source")
    partition = sample.get("partition") if source is None else f"{source}:{sample.get('partition')}"
    offset = sample.get("offset")
    return f"partition {partition}" if offset is None else f"partition {partition} offset {offset}"
