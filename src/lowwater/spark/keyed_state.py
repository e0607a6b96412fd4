"""The text a key is stored, grouped and joined under on the keyed path.

The keyed path runs a window or keyed process operator per Spark task over the keys of one
bucket; each visited key's slice of the operator (``take_key_slices`` / ``put_key_slice`` on
the operators, :mod:`lowwater.core.windows.key_slice`) is stored, sealed, under this text.
"""

from __future__ import annotations

from collections.abc import Hashable

__all__ = ["key_bytes"]


def key_bytes(key: Hashable) -> str:
    """A text that is equal for equal keys, across processes (Spark groups and joins on it)."""
    if isinstance(key, bool):
        return f"b:{key}"
    if isinstance(key, int):
        return f"i:{key}"
    if isinstance(key, str):
        return f"s:{key}"
    return f"r:{type(key).__qualname__}:{key!r}"
