"""Restoring state into operators built from the current code.

A checkpoint keeps *data* (watermarks, counters, window contents, timers); a restart runs
the pipeline as it is now, so a fixed user function takes effect, as with a Flink
savepoint. :func:`transfer_state` copies the data of an old object (an assigner, a
generator, their wrappers) into a new one of the same class, recursively, and leaves
everything that is code (functions, methods, classes) as the new object has it.
"""

from __future__ import annotations

import types
from typing import Any

__all__ = ["transfer_state"]

_CODE = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, type, types.ModuleType)


def _is_code(value: Any) -> bool:
    return isinstance(value, _CODE) or (callable(value) and not hasattr(value, "__dict__"))


def transfer_state(old: Any, new: Any, depth: int = 0) -> None:
    """Copy ``old``'s data attributes into ``new`` (same class), keeping ``new``'s code."""
    if depth > 8 or type(old) is not type(new) or not hasattr(old, "__dict__"):
        return
    for name, value in vars(old).items():
        if _is_code(value):
            continue
        current = getattr(new, name, None)
        if current is not None and type(current) is type(value) and hasattr(value, "__dict__") \
                and not isinstance(value, (list, dict, set, tuple)):
            transfer_state(value, current, depth + 1)  # a nested object: its data, its new code
        else:
            setattr(new, name, value)
