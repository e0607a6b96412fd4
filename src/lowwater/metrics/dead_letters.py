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

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["describe_reasons", "merge_reasons", "reason_kind", "summarize_dead"]

TOP_REASONS = 5
SAMPLE_CHARS = 300


def summarize_dead(rows: Iterable[Mapping[str, Any]], top: int = TOP_REASONS) -> dict[str, Any]:
    """``{"dead_letter_reasons": {reason: count} (the ``top`` most frequent), "dead_letter_sample": {...}}``,
    or ``{}`` when there are no dead letters."""
    counts: Counter[str] = Counter()
    sample: dict[str, Any] | None = None
    for row in rows:
        reason = str(row.get("reason") or "no reason given")
        counts[reason_kind(reason)] += 1
        if sample is None:
            record = row.get("record")
            text = record if isinstance(record, str) else json.dumps(record, default=str, sort_keys=True)
            sample = {"reason": reason, "partition": row.get("partition"), "offset": row.get("offset"),
                      "record": text[:SAMPLE_CHARS]}
    if not counts:
        return {}
    return {"dead_letter_reasons": dict(counts.most_common(top)), "dead_letter_sample": sample}


def reason_kind(reason: str) -> str:
    """A reason without the record's own details: ``record does not parse: '{...'`` ->
    ``record does not parse``; ``missing key (user)`` stays as it is."""
    return reason.split(": ", 1)[0]


def merge_reasons(lines: Sequence[Mapping[str, Any]], top: int = TOP_REASONS) -> dict[str, int]:
    """The most frequent reasons over several metrics lines."""
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update({str(k): int(v) for k, v in (line.get("dead_letter_reasons") or {}).items()})
    return dict(counts.most_common(top))


def describe_reasons(reasons: Mapping[str, int]) -> str:
    """``missing key (user) x3, record does not parse: 'x' x1``"""
    return ", ".join(f"{reason} x{n}" for reason, n in reasons.items())
