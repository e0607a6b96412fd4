"""The files of :class:`~lowwater.spark.sources.BatchFilesSource`, read the one way both runtimes read them.

Each line of a batch file is ``{"partition": p, "offset": o, "seq": i, "timestamp": ms|null,
"value": {...}}``; the files are read in name order, one micro-batch each. The ``value``'s
declared fields are read by the rules of :mod:`lowwater.io.fields`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from lowwater.core.errors import LowwaterError
from lowwater.graph.sources import SourceRecord
from lowwater.io.fields import FieldError, decode_json, has_decimals, read_element

__all__ = ["FILE_GLOB", "BatchFileError", "batch_files", "read_batch_data", "read_batch_file"]


class BatchFileError(LowwaterError):
    """A line of a batch file that is not a record of the format."""


FILE_GLOB = "batch-*.jsonl"
"""The names of a directory's batch files (``batch-00000000.jsonl``, ...)."""


def batch_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The batch files of ``directory``, in the order they are read."""
    return sorted(Path(directory).glob(FILE_GLOB))


def read_batch_file(path: Path, fields: Sequence[tuple[str, str]]) -> list[tuple[SourceRecord, int | None]]:
    """:func:`read_batch_data` of the file at ``path``."""
    return read_batch_data(path.read_bytes(), str(path), fields)


def read_batch_data(data: bytes, name: str, fields: Sequence[tuple[str, str]]) -> list[tuple[SourceRecord, int | None]]:
    """Each record of the batch file ``name`` whose bytes are ``data``, with its ``seq``: the element of its value's
    declared ``fields`` (canonical, :func:`~lowwater.io.fields.parse_fields`), or a dead letter
    (``error`` the reason) when the value is not an object or a field is not its type.

    Raises
    ------
    BatchFileError
        A line is not JSON, not an object, or has no integer ``partition``, or an ``offset``,
        ``seq`` or ``timestamp`` that is not an integer or null.
    """
    exact = has_decimals(fields)  # a DECIMAL field reads numbers' texts
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BatchFileError(f"{name} is not UTF-8 ({e})") from None
    out: list[tuple[SourceRecord, int | None]] = []
    # split at \n alone: str.splitlines also splits at U+2028 and others, which a JSON string may hold
    lines = text.split("\n")
    if lines[-1] == "":  # after the last newline (an empty file has no line)
        lines.pop()
    for number, line in enumerate(lines, 1):
        where = f"{name}, line {number}"
        try:
            r = decode_json(line) if exact else json.loads(line)
        except (json.JSONDecodeError, RecursionError) as e:
            raise BatchFileError(f"{where} is not JSON ({e}): {line[:80]!r}") from None
        if not isinstance(r, dict):
            raise BatchFileError(f"{where} is a JSON {type(r).__name__}, not a record object")
        envelope: dict[str, Any] = {k: r.get(k) for k in ("partition", "offset", "seq", "timestamp")}
        for k, v in envelope.items():
            if (v is None and k != "partition") or (isinstance(v, int) and not isinstance(v, bool)
                                                     and -(2**63) <= v < 2**63):
                continue
            shown = str(v) if isinstance(v, Decimal) else repr(v)  # as written, where decode_json read it
            raise BatchFileError(f"{where}: {k!r} is {shown}; it must be an integer"
                                 + ("" if k == "partition" else " or null"))
        p: int = envelope["partition"]
        offset, seq, ts = envelope["offset"], envelope["seq"], envelope["timestamp"]
        if not 0 <= p < 2**31:
            raise BatchFileError(f"{where}: 'partition' is {p}; it must be from 0 to 2**31 - 1")
        value = r.get("value")
        if not isinstance(value, dict):
            reason = "record has no 'value' field" if "value" not in r else \
                f"'value' must be a JSON object, got {type(value).__name__}"
            out.append((SourceRecord(None, p, offset, ts, error=reason), seq))
            continue
        try:
            out.append((SourceRecord(read_element(value, fields), p, offset, ts), seq))
        except FieldError as e:
            out.append((SourceRecord(None, p, offset, ts, error=str(e)), seq))
    return out
