"""Objects as plain data (JSON), and back into objects built by the current code.

The checkpoint keeps the *data* of watermark generators and timestamp assigners (max
timestamps, idleness timers, last emitted watermarks), never code and never pickle:
:func:`to_data` turns an object graph into JSON-able values, and :func:`restore` writes
them into a fresh object that the pipeline's strategy has just built, keeping the fresh
object's functions (so a fixed user function takes effect on restart, as with a Flink
savepoint; see :mod:`lowwater.runtime.restore`).

Encoding: ``None``, booleans, ints, floats and strings as themselves; ``{"__list__": [...]}``,
``{"__tuple__": [...]}``, ``{"__set__": [...]}``, ``{"__deque__": [...], "maxlen": n}``,
``{"__dict__": [[k, v], ...]}``; a namedtuple as ``{"__namedtuple__": "module:QualName", "f": [...]}``
and a dict subclass (``defaultdict``, ``Counter``, ``OrderedDict``) as
``{"__mapping__": "module:QualName", "items": [[k, v], ...]}`` (a defaultdict's ``"factory"`` by
name), each restored as its class (until session 37 a namedtuple was kept without its values and
a defaultdict came back a plain dict); an object as
``{"__obj__": "module:QualName", "a": {attr: value}}`` (its ``__dict__`` and ``__slots__``); code
(functions, classes, modules) as ``{"__code__": name}``, restored as whatever the fresh object
has. Anything else raises :class:`SnapshotError`.
"""

from __future__ import annotations

import collections
import enum
import importlib
import types
from typing import Any

from lowwater.core.errors import LowwaterError

__all__ = ["SnapshotError", "restore", "to_data"]

_CODE = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.BuiltinMethodType, type,
         types.ModuleType, types.LambdaType)
_MAX_DEPTH = 32


class SnapshotError(LowwaterError):
    """State that is not plain data (it cannot be kept in the checkpoint as JSON)."""


def _name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _attrs(obj: Any) -> dict[str, Any]:
    out = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                out[slot] = getattr(obj, slot)
    return out


def to_data(obj: Any, depth: int = 0) -> Any:
    """``obj`` as JSON-able data (see the module docstring)."""
    if depth > _MAX_DEPTH:
        raise SnapshotError(f"state nested deeper than {_MAX_DEPTH} levels (a cycle?)")
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, enum.Enum):
        return {"__enum__": _name(type(obj)), "name": obj.name}
    if isinstance(obj, _CODE) or (callable(obj) and not hasattr(obj, "__dict__") and not hasattr(obj, "__slots__")):
        return {"__code__": getattr(obj, "__qualname__", type(obj).__qualname__)}
    d = depth + 1
    if isinstance(obj, list):
        return {"__list__": [to_data(x, d) for x in obj]}
    if isinstance(obj, tuple):
        if hasattr(obj, "_fields"):  # a namedtuple: its values (it has no __dict__, and empty __slots__)
            return {"__namedtuple__": _name(type(obj)), "f": [to_data(x, d) for x in obj]}
        return {"__tuple__": [to_data(x, d) for x in obj]}
    if isinstance(obj, (set, frozenset)):
        return {"__set__": [to_data(x, d) for x in obj]}
    if isinstance(obj, collections.deque):
        return {"__deque__": [to_data(x, d) for x in obj], "maxlen": obj.maxlen}
    if isinstance(obj, dict):
        items = [[to_data(k, d), to_data(v, d)] for k, v in obj.items()]
        if type(obj) is dict:
            return {"__dict__": items}
        # a defaultdict, a Counter, an OrderedDict: restored as its class, not as a plain dict
        mapping: dict[str, Any] = {"__mapping__": _name(type(obj)), "items": items}
        if isinstance(obj, collections.defaultdict):
            mapping["factory"] = getattr(obj.default_factory, "__qualname__", None)
        return mapping
    if hasattr(obj, "__dict__") or hasattr(type(obj), "__slots__"):
        return {"__obj__": _name(type(obj)), "a": {k: to_data(v, d) for k, v in _attrs(obj).items()}}
    raise SnapshotError(f"cannot keep a {type(obj).__qualname__} in the checkpoint: a watermark generator's or "
                        "timestamp assigner's state must be plain data (numbers, strings, lists, dicts, objects "
                        "of them)")


def _class(name: str) -> Any:
    module, _, qual = name.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qual.split("."):
        if part == "<locals>":
            raise SnapshotError(f"{name} is defined inside a function; it can only be restored into a fresh object")
        obj = getattr(obj, part)
    return obj


def restore(data: Any, fresh: Any = None) -> Any:
    """The object ``data`` describes, written into ``fresh`` when it is of the same class."""
    if not isinstance(data, dict):
        return data
    if "__code__" in data:
        return fresh
    if "__list__" in data:
        return [restore(x) for x in data["__list__"]]
    if "__tuple__" in data:
        return tuple(restore(x) for x in data["__tuple__"])
    if "__set__" in data:
        return {restore(x) for x in data["__set__"]}
    if "__deque__" in data:
        return collections.deque((restore(x) for x in data["__deque__"]), data["maxlen"])
    if "__dict__" in data:
        return {restore(k): restore(v) for k, v in data["__dict__"]}
    if "__namedtuple__" in data:
        values = [restore(x) for x in data["f"]]
        same = fresh is not None and _name(type(fresh)) == data["__namedtuple__"]
        return (type(fresh) if same else _class(data["__namedtuple__"]))(*values)
    if "__mapping__" in data:
        return _mapping(data, fresh)
    if "__enum__" in data:
        return _class(data["__enum__"])[data["name"]]
    name = data["__obj__"]
    if fresh is not None and _name(type(fresh)) == name:
        target = fresh
    else:
        cls = _class(name)
        target = cls.__new__(cls)
    for attr, value in data["a"].items():
        current = getattr(target, attr, None) if target is fresh else None
        object.__setattr__(target, attr, restore(value, current))
    return target


def _mapping(data: dict[str, Any], fresh: Any) -> Any:
    """A dict subclass :func:`to_data` wrote, as its class: a ``defaultdict`` with the fresh object's
    factory (or a builtin one by name: ``int``, ``list``...), a ``Counter``, an ``OrderedDict``."""
    import builtins

    if fresh is not None and _name(type(fresh)) == data["__mapping__"]:
        cls: Any = type(fresh)
        factory = getattr(fresh, "default_factory", None)
    else:
        cls = _class(data["__mapping__"])
        factory = getattr(builtins, data.get("factory") or "", None)
    target = cls(factory) if issubclass(cls, collections.defaultdict) else cls()
    for k, v in data["items"]:
        target[restore(k)] = restore(v)
    return target
