"""The partitioned log's record format: the manifest and segment names, :class:`LogRecord`,
and the decoding of stored records (a bad one becomes an error record, never vanishes).
See :mod:`lowwater.io.log` for the layout."""

from __future__ import annotations

import json
import operator
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from lowwater.core.errors import ConfigurationError, LowwaterError
from lowwater.io.fields import decode_json

__all__ = ["FORMATS", "MANIFEST_NAME", "CorruptLogError", "LogRecord"]

FORMATS: tuple[str, ...] = ("jsonl", "parquet")
"""The segment formats a log can be written in."""

MANIFEST_NAME = "_partitions.json"
"""File name of the manifest at the root of a log."""

_MANIFEST_KIND = "lowwater.partitioned_log"
_MANIFEST_VERSION = 1
_PARTITION_DIR = re.compile(r"^partition=(0|[1-9][0-9]*)$")
_SEGMENT_FILE = re.compile(r"^segment-([0-9]{20})\.(jsonl|parquet)$")
_SNIPPET_CHARS = 120


class CorruptLogError(LowwaterError):
    """The log's files are inconsistent in a way no single record can report.

    Raised for missing offsets (a gap between segments), overlapping segments, two
    segments with the same first offset, or a Parquet segment that cannot be read.
    """


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record of a partitioned log.

    Attributes
    ----------
    partition : int
        Partition number, ``>= 0``.
    offset : int
        Position in the partition: dense, from 0, strictly increasing in file order.
    timestamp : int or None
        Source timestamp in epoch milliseconds, if the producer set one.
    value : dict or None
        The payload. ``None`` exactly when ``error`` is set.
    error : str or None
        Why the stored record could not be decoded; ``None`` for a good record.
    """

    partition: int
    offset: int
    timestamp: int | None
    value: dict[str, Any] | None
    error: str | None = None


# --------------------------------------------------------------------------- validation


def _as_int(x: object) -> int | None:
    if isinstance(x, bool):
        return None
    try:
        return operator.index(x)  # type: ignore[arg-type]
    except TypeError:
        return None


def _check_partition(partition: object, parameter: str = "partition") -> int:
    p = _as_int(partition)
    if p is None or p < 0:
        raise ConfigurationError(
            parameter, f"a partition must be an int >= 0, got {partition!r}"
        )
    return p


def _check_format(fmt: object) -> str:
    if fmt not in FORMATS:
        raise ConfigurationError(
            "format", f"unknown log format {fmt!r}; use one of {', '.join(FORMATS)}"
        )
    return str(fmt)


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
        import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
    except ImportError as exc:  # pragma: no cover - pyarrow ships with the spark extra
        raise ConfigurationError(
            "format", "parquet segments need pyarrow; pip install 'lowwater[spark]'"
        ) from exc
    return pa, pq


# --------------------------------------------------------------------------- decoding


def _snippet(raw: bytes | str) -> str:
    text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    if len(text) > _SNIPPET_CHARS:
        text = text[:_SNIPPET_CHARS] + "..."
    return repr(text)


def _shown(x: object) -> str:
    """``repr(x)``, a ``Decimal`` (decode_json's number) as the float json.loads makes: a reason
    is worded the same whether or not the source has a DECIMAL field."""
    return repr(float(x)) if isinstance(x, Decimal) else repr(x)


def _bad(partition: int, offset: int, reason: str) -> LogRecord:
    return LogRecord(partition, offset, None, None, reason)


def _from_object(partition: int, offset: int, obj: object, raw: bytes | str) -> LogRecord:
    """Validate one decoded record object; a bad one becomes an error record."""
    if not isinstance(obj, dict):
        return _bad(
            partition, offset, f"record is a JSON {type(obj).__name__}, not an object: "
            f"{_snippet(raw)}"
        )
    if "value" not in obj:
        return _bad(partition, offset, f"record has no 'value' field: {_snippet(raw)}")
    value = obj["value"]
    if not isinstance(value, dict):
        return _bad(
            partition, offset,
            f"'value' must be a JSON object, got {type(value).__name__}: {_snippet(raw)}",
        )
    timestamp = obj.get("timestamp")
    if timestamp is not None and (isinstance(timestamp, bool) or not isinstance(timestamp, int)
                                  or not -(2**63) <= timestamp < 2**63):
        return _bad(
            partition, offset,
            f"'timestamp' must be a 64-bit int (epoch ms) or null, got {_shown(timestamp)}",
        )
    # a null offset or partition is an absent one, as in a Parquet segment's column (and as
    # Arrow's reader, which cannot tell them apart, reads it)
    stored_offset = offset if obj.get("offset") is None else obj["offset"]
    if stored_offset != offset or isinstance(stored_offset, bool):
        return _bad(
            partition, offset,
            f"stored offset {_shown(stored_offset)} does not match position {offset}",
        )
    stored_partition = partition if obj.get("partition") is None else obj["partition"]
    if stored_partition != partition or isinstance(stored_partition, bool):
        return _bad(
            partition, offset,
            f"stored partition {_shown(stored_partition)} does not match directory {partition}",
        )
    return LogRecord(partition, offset, timestamp, value)


def _decode_line(partition: int, offset: int, line: bytes, exact_numbers: bool = False) -> LogRecord:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _bad(partition, offset, f"line is not UTF-8 ({exc}): {_snippet(line)}")
    if not text.strip():
        return _bad(partition, offset, "empty line")
    try:
        # with exact_numbers, a number's text beside its float, for a DECIMAL field (lowwater.io.fields)
        obj = decode_json(text) if exact_numbers else json.loads(text)
    except json.JSONDecodeError as exc:
        return _bad(partition, offset, f"invalid JSON ({exc}): {_snippet(text)}")
    except RecursionError:
        return _bad(partition, offset, f"JSON nested too deeply to decode: {_snippet(text)}")
    return _from_object(partition, offset, obj, text)
